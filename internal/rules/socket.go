package rules

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Helpers of the time split and the findings about what held the
// servers' senders: the kernel's accounting of each connection
// (evidence.Senders, tcp_info), read for the load's own connections.

// initCwnd is the kernel's initial congestion window, in segments
// (TCP_INIT_CWND): a window restarted after idle starts again from it,
// and one at most twice as large costs at most a round trip to regain.
const initCwnd = 10

// loadGroups says which of the server side's sender groups are the
// load's own connections: the peers (as the server sees them) whose
// addresses the client side's busy connections to the run's port came
// from, "peer ADDR"; else, when none is known (the client side not
// observed, or an address rewritten on the way), every connection of
// the front port, "listener :PORT". The load's connections are the
// client's busy senders: other clients of the port in the client's
// namespace that only read (slow readers) send nothing.
func loadGroups(r *evidence.Run) (of string, match func(evidence.SenderGroup) bool) {
	port, _ := strconv.Atoi(r.Port)
	peers := map[string]bool{}
	if c := r.Client(); c != nil && c.Bundle != nil {
		for _, s := range r.Window(c).Snapshots {
			if s.Senders == nil {
				continue
			}
			for _, cn := range s.Senders.Conns {
				_, rport, err := net.SplitHostPort(cn.Remote)
				if err != nil || cn.Inbound || rport != r.Port || cn.BusySinceUS == 0 {
					continue
				}
				if host, _, err := net.SplitHostPort(cn.Local); err == nil {
					peers[host] = true
				}
			}
		}
	}
	if b := serverBundle(r); b != nil && len(peers) > 0 {
		// Only peers the server side knows: an address rewritten on the
		// way (NAT) is not one.
		known := false
		for _, s := range b.Snapshots {
			if s.Senders == nil {
				continue
			}
			for _, g := range s.Senders.Peers {
				known = known || g.Inbound && peers[g.Peer]
			}
		}
		if known {
			names := make([]string, 0, len(peers))
			for p := range peers {
				names = append(names, p)
			}
			slices.Sort(names)
			of = "peer"
			if len(names) > 1 {
				of = "peers"
			}
			for i, p := range names {
				if i == 0 {
					of += " " + p
				} else {
					of += ", " + p
				}
			}
			return of, func(g evidence.SenderGroup) bool { return g.Inbound && peers[g.Peer] }
		}
	}
	return "listener :" + r.Port, func(g evidence.SenderGroup) bool { return g.Peer == "" && g.Port == port }
}

// sendersOver sums what the matched sender groups of a bundle rose by in
// the intervals between its snapshots, each interval weighed by the
// share of it that falls in the load seconds marked in use: the load's
// answers of those seconds. ok is false without two snapshots with
// senders.
func sendersOver(b *evidence.Bundle, match func(evidence.SenderGroup) bool, tl []load.Second, use []bool) (evidence.SenderCounters, bool) {
	var sum evidence.SenderCounters
	var prev *evidence.Snapshot
	ok := false
	for i := range b.Snapshots {
		s := &b.Snapshots[i]
		if s.Senders == nil {
			continue
		}
		if prev != nil {
			if f := overlap(prev.Time, s.Time, tl, use); f > 0 {
				ok = true
				d := groupsDelta(prev, s, match)
				sum.Add(scaled(d, f))
			}
		}
		prev = s
	}
	return sum, ok
}

// groupsDelta is what the matched groups rose by from one snapshot's
// senders to the next: a group first seen after the earlier snapshot
// counts from 0, one the earlier snapshot did not list (a peer outside
// its busiest) is left out of this interval.
func groupsDelta(a, z *evidence.Snapshot, match func(evidence.SenderGroup) bool) evidence.SenderCounters {
	var d evidence.SenderCounters
	for _, gs := range [][]evidence.SenderGroup{z.Senders.Listeners, z.Senders.Peers} {
		for _, g := range gs {
			if !match(g) {
				continue
			}
			base, found := evidence.SenderCounters{}, false
			for _, x := range append(slices.Clip(a.Senders.Listeners), a.Senders.Peers...) {
				if x.Port == g.Port && x.Peer == g.Peer && x.Inbound == g.Inbound {
					base, found = x.SenderCounters, true
					break
				}
			}
			if !found && !g.Since.After(a.Time) {
				continue
			}
			d.Add(g.SenderCounters.Sub(base))
		}
	}
	return d
}

// overlap is the share of [from, to] that falls in the load seconds
// marked in use.
func overlap(from, to time.Time, tl []load.Second, use []bool) float64 {
	span := to.Sub(from)
	if span <= 0 {
		return 0
	}
	var in time.Duration
	for i, s := range tl {
		if !use[i] {
			continue
		}
		a, z := s.Start, s.Start.Add(s.Length)
		if a.Before(from) {
			a = from
		}
		if z.After(to) {
			z = to
		}
		if z.After(a) {
			in += z.Sub(a)
		}
	}
	return min(1, float64(in)/float64(span))
}

// scaled is c with its time and counts multiplied by f (rounded down):
// the part of an interval's accounting that fell in the seconds
// counted.
func scaled(c evidence.SenderCounters, f float64) evidence.SenderCounters {
	if f >= 1 {
		return c
	}
	m := func(v uint64) uint64 { return uint64(float64(v) * f) }
	return evidence.SenderCounters{
		Conns: m(c.Conns), Ended: m(c.Ended), Left: m(c.Left), Unlooked: m(c.Unlooked),
		BusyUS: m(c.BusyUS), RwndLimitedUS: m(c.RwndLimitedUS), SndbufLimitedUS: m(c.SndbufLimitedUS),
		BytesSent: m(c.BytesSent), BytesRetrans: m(c.BytesRetrans), BytesAcked: m(c.BytesAcked), BytesReceived: m(c.BytesReceived),
		DataSegsOut: m(c.DataSegsOut), Retrans: m(c.Retrans), RTOs: m(c.RTOs), RTORecoveries: m(c.RTORecoveries), RTOTimeMS: m(c.RTOTimeMS),
		Looks: m(c.Looks), RTTSumUS: m(c.RTTSumUS), MinRTTSumUS: m(c.MinRTTSumUS), CwndSum: m(c.CwndSum), SndWndSum: m(c.SndWndSum),
		SendQSum: m(c.SendQSum), NotSentSum: m(c.NotSentSum), ZeroWindowLooks: m(c.ZeroWindowLooks), SndbufFullLooks: m(c.SndbufFullLooks),
		SendingLooks: m(c.SendingLooks), CwndSendingSum: m(c.CwndSendingSum), IdleLooks: m(c.IdleLooks), CwndIdleSum: m(c.CwndIdleSum),
		IdleResumes: m(c.IdleResumes), Restarts: m(c.Restarts), RestartCwndSum: m(c.RestartCwndSum),
	}
}

// socketTime is what held the load's answers in the server's sockets in
// the load seconds marked in use, per answer (nil without the senders'
// accounting or an answer): the senders' busy time, from the write to
// the last acknowledgement, by what held it. The kernel counts the part
// the receiver's window held (tcpi_rwnd_limited) and the part the send
// buffer did (tcpi_sndbuf_limited); the rest was in flight. Of that,
// one round trip an answer (the connections' lowest, min_rtt) is the
// network's own time, the time in RTO recoveries (tcpi_total_rto_time)
// waited for retransmission timeouts, and what is left took more round
// trips than one: the congestion window, with the cause the kernel
// shows: restarted after an idle longer than the RTO (most answers after
// idle restarted: tcp_slow_start_after_idle), cut after loss (segments
// retransmitted), or a new connection's initial window (as many
// connections as answers).
func socketTime(r *evidence.Run, tl []load.Second, use []bool, answers uint64) *report.SocketTime {
	b := serverBundle(r)
	if b == nil || answers == 0 {
		return nil
	}
	of, match := loadGroups(r)
	c, ok := sendersOver(b.From(r.LoadStart), match, tl, use)
	if !ok || c.BusyUS == 0 {
		return nil
	}
	us := func(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }
	per := func(v uint64) time.Duration { return us(v) / time.Duration(answers) }
	st := &report.SocketTime{Of: of, Busy: per(c.BusyUS), Answers: answers, IdleResumes: c.IdleResumes, Restarts: c.Restarts,
		Retrans: c.Retrans, RTOs: c.RTOs, NewConns: c.Conns, Parts: map[string]time.Duration{}}
	if c.Looks > 0 {
		st.MinRTT, st.RTT = us(c.MinRTTSumUS/c.Looks), us(c.RTTSumUS/c.Looks)
	}
	if c.Restarts > 0 {
		st.RestartCwnd = float64(c.RestartCwndSum) / float64(c.Restarts)
	}
	flight := c.CwndLimitedUS()
	rto := min(flight, c.RTOTimeMS*1000)
	flight -= rto
	rtt := min(flight, answers*uint64(st.MinRTT/time.Microsecond))
	held := flight - rtt
	st.Parts[report.BucketRwnd] = per(c.RwndLimitedUS)
	st.Parts[report.BucketSndbuf] = per(c.SndbufLimitedUS)
	st.Parts[report.BucketRTO] = per(rto)
	st.Parts[report.BucketInFlight] = per(rtt)
	st.Parts[cwndCause(c, answers)] = per(held)
	for k, v := range st.Parts {
		if v <= 0 {
			delete(st.Parts, k)
		}
	}
	return st
}

// cwndCause is the bucket of the time a congestion window held answers
// beyond a round trip each: restarted after idle when most answers sent
// after an idle restarted (and from a window worth more than a round
// trip), cut after loss when segments were retransmitted, new
// connections' initial window when about every answer had its own;
// else the window itself.
func cwndCause(c evidence.SenderCounters, answers uint64) string {
	switch {
	case c.Restarts > 0 && 2*c.Restarts >= c.IdleResumes && c.RestartCwndSum > 2*initCwnd*c.Restarts:
		return report.BucketCwndIdleRestart
	case c.Retrans > 0 && 1000*c.BytesRetrans >= c.BytesSent:
		return report.BucketCwndLoss
	case 2*c.Conns >= answers:
		return report.BucketCwndNewConn
	}
	return report.BucketCwnd
}

// senderGroup is one group of a namespace's senders a rule judges: a
// listening port's accepted connections or the connections made from
// here to one destination, with what a finding about it names.
type senderGroup struct {
	evidence.SenderGroup
	// Subject and About name it: a listener's address ("10.0.0.1:80",
	// About.Listen), a destination's ("→ 10.0.0.3:5432", About.Remotes).
	Subject string
	About   report.About
	// Inbound: a listener's connections, whose peers are its clients.
	Inbound bool
}

// senderGroups are the groups of a bundle's senders over its window
// (their deltas) that a rule about what held them judges: each
// listening port's connections and each destination's, busy in the
// window. In a run, the client side's connections to the run's port are
// netdoctor's own load and are left out: what held the load's requests
// is the load's, not the service's. The second result is every peer's
// group (the clients of the listeners, the destinations), for the
// evidence.
func senderGroups(in *Input) ([]senderGroup, []evidence.SenderGroup) {
	b := in.Bundle
	if b == nil || len(b.Snapshots) < 2 {
		return nil, nil
	}
	ls, ps := b.SenderDeltas()
	last := &b.Snapshots[len(b.Snapshots)-1]
	var out []senderGroup
	for _, g := range ls {
		if g.BusyUS == 0 {
			continue
		}
		addr := ":" + strconv.Itoa(g.Port)
		if last.Sockets != nil {
			for _, l := range last.Sockets.Listeners {
				if l.Proto != "unix" && l.Port == g.Port {
					addr = l.Addr
					break
				}
			}
		}
		out = append(out, senderGroup{SenderGroup: g, Subject: addr, About: report.About{Listen: addr}, Inbound: true})
	}
	for _, g := range ps {
		if g.Inbound || g.BusyUS == 0 {
			continue
		}
		if in.Run != nil && in.Side == report.Client {
			if _, port, err := net.SplitHostPort(g.Peer); err == nil && port == in.Run.Port {
				continue
			}
		}
		out = append(out, senderGroup{SenderGroup: g, Subject: "→ " + g.Peer, About: report.About{Remotes: []string{g.Peer}}})
	}
	return out, ps
}

// usDur is microseconds as a duration.
func usDur(v uint64) time.Duration { return time.Duration(v) * time.Microsecond }

// ratio is a over b, 0 when b is.
func ratio(a, b uint64) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// loadPeer reports whether a peer group is a run's own load's
// connections at the server (loadGroups).
func loadPeer(in *Input, g evidence.SenderGroup) bool {
	if in.Run == nil || !in.ServerSide() {
		return false
	}
	of, match := loadGroups(in.Run)
	return strings.HasPrefix(of, "peer") && match(g)
}

// congestionControls says a group's open connections' congestion
// controls: "cubic ×2, bbr ×1".
func congestionControls(g evidence.SenderGroup) string {
	var names []string
	for name := range g.Cong {
		names = append(names, name)
	}
	slices.Sort(names)
	var parts []string
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s ×%d", n, g.Cong[n]))
	}
	return strings.Join(parts, ", ")
}
