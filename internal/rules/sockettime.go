package rules

import (
	"fmt"
	"math"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// CwndRestartAfterIdle: the answers wait for a congestion window the
// kernel restarted from the initial one after an idle.
const CwndRestartAfterIdle report.FindingID = "cwnd-restart-after-idle"

var _ = define(Class{ID: CwndRestartAfterIdle,
	Delays: true, Latency: true,
	Meaning:    "answers sent after an idle spell climb slow start again from the initial window (`net.ipv4.tcp_slow_start_after_idle` on a congestion control that honours it: CUBIC, Reno), taking round trips a kept window would not",
	Active:     "the load's p50 ≥ 30 ms, and the largest part of the p50's time split is the server's senders held by a congestion window the kernel restarted after idle (most answers after an idle longer than the RTO restarted, from a window over twice the initial one), ≥ 25 % of the p50 (warning)",
	LatentWhen: "—",
	Seed:       "issue 37 (512 KiB answers after idle over a 50 ms round trip)",
	ReportedBy: "`run`",
	Doc: `Rule ´sockettime´ (´sockettime.go´), in ´netdoctor run´, from the time split (´latency_split´, see
below). The server's senders of the load's connections are read from tcp_info at each look and at each
connection's end (´senders´ in a snapshot's JSON): their busy time (´tcpi_busy_time´: data in flight or
waiting to be sent), the parts the receiver's window and the send buffer held (´tcpi_rwnd_limited´,
´tcpi_sndbuf_limited´), and the answers that began after an idle longer than the RTO and whether the
kernel restarted their window (an idle longer than the RTO seen at one look, with ´snd_cwnd´ back at
the initial window or below by the next, data sent between). Per answer, the busy time splits into one
round trip (the connections' ´min_rtt´: the network's own time), the time in RTO recoveries, and the
rest, which took more round trips than one: the congestion window, named by its cause where the kernel
shows it (restarted after idle; cut after loss; new connections' initial window). The split places
that time before what is inferred (the queue for held threads), so "waiting for a CPU" is no longer
made of what the window held. **Active, warning** when the load's p50 is at least 30 ms and its largest
part is "held by the congestion window restarted after idle", at least a quarter of the p50, with the
server's ´tcp_slow_start_after_idle´ not 0. Title: ´Answers after an idle wait for the congestion
window to regrow (p50 311ms, 246ms of it): tcp_slow_start_after_idle restarts cubic's window´. Evidence:
the split, the restarts of the answers after idle and the window they restarted from against the
initial 10 segments (´14 of 15 answers after an idle restarted their window, from 363 segments on
average: about 6 round trips of 52ms to regrow´), the sysctl and the connections' congestion controls.
Fix, on the sender: ´net.ipv4.tcp_slow_start_after_idle = 0´ in the server's namespace, or BBR for its
routes (which keeps its window across idle). An example split, nginx sending 512 KiB answers every 2 s
on each keep-alive connection over a 50 ms round trip with CUBIC: ´p50 311ms ≈ held by the congestion
window restarted after idle 246ms (79%), in flight (the round trip) 52ms (17%), held by the receiver's
window 10ms (3%)´; with BBR or the sysctl at 0 the p50 is one round trip, mostly "in flight", and
nothing is named. Tested (TestRunIdleRestart: Cubic, BBR, Off).`,
})

var _ = register(Rule{Name: "sockettime", Order: 225, Scope: PerRun, IDs: []report.FindingID{CwndRestartAfterIdle},
	Checks: "what held the answers in the server's sockets", Check: checkSocketTime})

// socketShare is the least share of the p50 a socket's part must have
// to be named: less is not the answer to why requests are slow.
const socketShare = 0.25

// checkSocketTime names what held the load's answers in the server's
// sockets when the time split says it is where most of the p50 went.
func checkSocketTime(in *Input) []report.Finding {
	r := in.Run
	if r == nil || r.Load == nil || r.Load.Latency.P50 < appSlowLatency {
		return nil
	}
	ts := TimeSplit(r)
	if ts == nil || ts.Socket == nil || len(ts.P50.Parts) == 0 {
		return nil
	}
	top := ts.P50.Parts[0]
	if top.Share < socketShare {
		return nil
	}
	b := serverBundle(r)
	switch top.Bucket {
	case report.BucketCwndIdleRestart:
		if f, ok := idleRestart(r, b, ts, top); ok {
			return []report.Finding{f}
		}
	}
	return nil
}

// splitItem is the time split of the p50, as evidence.
func splitItem(ts *report.TimeSplit) report.Item {
	return report.Item{Text: "where the time went: " + ts.Text(), Source: "tcp_info", Window: true}
}

// lastSysctl is a setting's value at the bundle's last snapshot that
// has it, "" when none does.
func lastSysctl(b *evidence.Bundle, name string) string {
	if b == nil {
		return ""
	}
	for i := len(b.Snapshots) - 1; i >= 0; i-- {
		if v, ok := b.Snapshots[i].Sysctls[name]; ok {
			return v
		}
	}
	return ""
}

// portGroup is the server's listener group of the run's port at the
// last snapshot with senders: its open connections' congestion
// controls and buffers.
func portGroup(r *evidence.Run, b *evidence.Bundle) (evidence.SenderGroup, bool) {
	if b == nil {
		return evidence.SenderGroup{}, false
	}
	_, match := loadGroups(r)
	for i := len(b.Snapshots) - 1; i >= 0; i-- {
		s := b.Snapshots[i].Senders
		if s == nil {
			continue
		}
		for _, gs := range [][]evidence.SenderGroup{s.Peers, s.Listeners} {
			for _, g := range gs {
				if match(g) && len(g.Cong) > 0 {
					return g, true
				}
			}
		}
	}
	return evidence.SenderGroup{}, false
}

const slowStartAfterIdle = "net.ipv4.tcp_slow_start_after_idle"

// idleRestart is the finding of answers held by windows restarted after
// idle: named with the sysctl that restarts them, on the server, unless
// that is known to be 0 (then the kernel restarted nothing, whatever
// the looks read).
func idleRestart(r *evidence.Run, b *evidence.Bundle, ts *report.TimeSplit, top report.Part) (report.Finding, bool) {
	st := ts.Socket
	v := lastSysctl(b, slowStartAfterIdle)
	if v == "0" || st.Restarts == 0 {
		return report.Finding{}, false
	}
	cong := "the congestion control"
	g, ok := portGroup(r, b)
	if ok {
		cong = congestionControls(g)
	}
	short := cong
	if ok && len(g.Cong) == 1 {
		for name := range g.Cong {
			short = name
		}
	}
	rounds := 1.0
	if st.RestartCwnd > initCwnd {
		rounds = math.Ceil(math.Log2(st.RestartCwnd / initCwnd))
	}
	p50 := ts.P50.Latency
	ev := []report.Item{
		splitItem(ts),
		{Text: fmt.Sprintf("%d of %d answers sent after an idle longer than the RTO restarted their window, from %.0f segments on average to the initial %d: about %.0f round trips of %s to regrow it (the server's connections of %s)",
			st.Restarts, st.IdleResumes, st.RestartCwnd, initCwnd, rounds, report.Dur(st.MinRTT), st.Of), Source: "tcp_info", Window: true},
	}
	if v != "" {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s = %s on the server; its connections' congestion control: %s", slowStartAfterIdle, v, cong), Source: "sysctl"})
	}
	f := report.Finding{ID: CwndRestartAfterIdle, Severity: report.Warning, Status: report.Active, Side: r.ServerSide(),
		Subject: "senders of :" + r.Port,
		About:   report.About{Listen: frontAddr(r)},
		Title: fmt.Sprintf("Answers after an idle wait for the congestion window to regrow (p50 %s, %s of it): %s restarts %s's window",
			report.Dur(p50), report.Dur(top.Time), "tcp_slow_start_after_idle", short),
		Evidence: ev,
		Actions: append([]report.Action{sysctlFix(b, slowStartAfterIdle, "0")}, notes(
			"or let the server's routes use BBR, which keeps its window across idle: `ip route change … congctl bbr`, or net.ipv4.tcp_congestion_control = bbr for new connections",
		)...),
	}
	return f, true
}

// frontAddr is the run's front server's listening address, "" when none
// was found.
func frontAddr(r *evidence.Run) string {
	for _, s := range r.Servers {
		if s.Role == "front" && !strings.HasPrefix(s.Addr, "unix:") {
			return s.Addr
		}
	}
	return ""
}
