package rules

import (
	"cmp"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// PacketLoss: segments are lost and retransmitted.
const PacketLoss report.FindingID = "packet-loss"

var _ = define(Class{ID: PacketLoss,
	PathFault: true,
	Critical:  true,
	Errors:    true, Delays: true, Latency: true,
	Hold:       15 * time.Minute,
	Meaning:    "TCP retransmits a significant share of what it sends",
	Active:     "data retransmissions ≥ 1 % of `TcpOutSegs` (warning), ≥ 5 % (critical), with ≥ 1000 segments sent",
	LatentWhen: "none",
	Seed:       "001 §1",
	ReportedBy: "`check`, `diagnose`",
})

var _ = register(Rule{Name: "loss", Order: 60, Scope: PerSide, IDs: []report.FindingID{PacketLoss}, Checks: "retransmissions", Check: checkLoss,
	Watches: []string{"Tcp.RetransSegs", "TcpExt.TCPSynRetrans"}})

// minSegments is the traffic below which a retransmission ratio means
// nothing: a handful of retransmits on an idle host is noise.
const minSegments = 1000

// checkLoss finds TCP retransmissions high enough to hurt throughput and
// latency. SYN retransmits are left out: they come from dropped SYNs,
// which the listen rules explain.
func checkLoss(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	out, _ := w.Counter("Tcp.OutSegs")
	retrans, _ := w.Counter("Tcp.RetransSegs")
	syn, _ := w.Counter("TcpExt.TCPSynRetrans")
	if retrans > syn {
		retrans -= syn
	} else {
		retrans = 0
	}
	if out < minSegments || retrans == 0 {
		return nil
	}
	ratio := float64(retrans) / float64(out)
	if ratio < 0.01 {
		return nil
	}
	f := report.Finding{ID: PacketLoss, Severity: report.Warning, Status: report.Active,
		Title: fmt.Sprintf("Packet loss: %.1f%% of TCP segments were retransmitted", 100*ratio),
		Evidence: []report.Item{{
			Text:   fmt.Sprintf("%d data retransmissions (TcpRetransSegs minus TcpExtTCPSynRetrans) of %d segments sent in %s", retrans, out, round(w)),
			Source: "TcpRetransSegs", Window: true,
		}},
		Actions: notes(
			"find where packets die: interface and qdisc drops (`ip -s link`, `tc -s qdisc`), firewall rules that drop (nft/iptables counters), the kernel's drop reasons (`perf record -e skb:kfree_skb -a`)",
			"on a lossy path, BBR (`net.ipv4.tcp_congestion_control=bbr`) holds throughput better than CUBIC",
		),
	}
	if ratio >= 0.05 {
		f.Severity = report.Critical
	}
	for _, c := range []string{"TcpExtTCPTimeouts", "TcpExtTCPLossProbes", "TcpExtTCPFastRetrans", "TcpExtTCPDSACKRecv"} {
		if it, d := counterItem(w, c); d > 0 {
			f.Evidence = append(f.Evidence, it)
		}
	}
	if it, ok := pathLossItem(in); ok {
		f.Evidence = append(f.Evidence, it)
	}
	f.Evidence = append(f.Evidence, whereLost(in, w)...)
	return []report.Finding{f}
}

// whereLost says where the retransmitted segments died, as far as the
// drop monitor can tell: the drops in this namespace that lose packets,
// those of a run's packets elsewhere on the host, and the connections
// that retransmitted most. When it saw no such drop here, the packets
// died beyond this host's namespace.
func whereLost(in *Input, w evidence.Window) []report.Item {
	here, elsewhere, ok := dropsIn(w)
	if !ok {
		return nil
	}
	var out []report.Item
	for _, d := range here {
		if !stray[d.Reason] && len(out) < 3 {
			out = append(out, report.Item{Text: "where packets die: " + dropText(d, w), Source: dropSource, Window: true})
		}
	}
	if len(out) == 0 {
		out = append(out, report.Item{Text: "the drop monitor saw no packet dropped in this namespace for a reason that loses traffic (only a closed socket's strays, if any): the segments died beyond it, on the path or at the peer", Source: dropSource, Window: true})
	}
	if in.Run != nil {
		if p, err := strconv.Atoi(in.Run.Port); err == nil {
			n := 0
			for _, d := range elsewhere {
				if !stray[d.Reason] && onPort(d, p) && n < 3 {
					out = append(out, report.Item{Text: "where packets die: " + dropText(d, w), Source: dropSource, Window: true})
					n++
				}
			}
		}
	}
	for i, f := range retransIn(w) {
		if i == 3 {
			break
		}
		out = append(out, report.Item{Text: fmt.Sprintf("%s → %s retransmitted %d segments (%d of them full-size, up to %d bytes)", f.Local, f.Remote, f.Segments, f.Full, f.MaxLen), Source: dropSource, Window: true})
	}
	return out
}

// queueRetrans is how many retransmissions each connection a full queue
// dropped may cost its client: the final ACK of its handshake, then the
// request behind it, each retransmitted with backoff until the queue
// takes the connection.
const queueRetrans = 4

// lossCauses marks retransmissions that are what a full accept queue (or
// a SYN queue that dropped) on the run's server dropped, not a lossy
// path: the client's connection is established on its side while the
// server dropped the handshake's last ACK, so its request is
// retransmitted until the queue takes it. With the drop monitor, the
// retransmitted segments are counted by flow: most on connections to the
// queue's port. Without it, the queue dropped enough connections to
// account for them (queueRetrans each). relate then lists them under
// the queue, as its consequence.
func lossCauses(fs []report.Finding, r *Run) {
	for i := range fs {
		f := &fs[i]
		if f.ID != PacketLoss || f.Status != report.Active || f.CausedBy != "" {
			continue
		}
		side := r.side(f.Side)
		if f.Side == report.Local {
			side = r.Server()
		}
		if side == nil {
			continue
		}
		for _, c := range fs {
			queue := c.ID == AcceptQueueOverflow || c.ID == SynQueueOverflow && c.Severity == report.Critical
			if !queue || c.Status != report.Active {
				continue
			}
			if why, ok := queueLoss(r, side, c); ok {
				w, _ := r.Window(side).Window()
				markLoss(f, w, c, "what the full queue of "+cmp.Or(c.Subject, "the listener")+" dropped, not a lossy path", why,
					"nothing to fix on the path: these are the connections the server's queue dropped; fix the queue ("+string(c.ID)+")")
				break
			}
		}
		if f.CausedBy == "" {
			if w, ok := r.Window(side).Window(); ok {
				dropLoss(fs, f, w)
			}
		}
	}
}

// retransRatio is the share of the segments sent that were data
// retransmissions, as checkLoss counts it.
func retransRatio(w evidence.Window) float64 {
	out, _ := w.Counter("Tcp.OutSegs")
	retrans, _ := w.Counter("Tcp.RetransSegs")
	syn, _ := w.Counter("TcpExt.TCPSynRetrans")
	if out == 0 {
		return 0
	}
	return float64(retrans-min(syn, retrans)) / float64(out)
}

// markLoss makes a loss the consequence of c, says what and why, and
// points its fix to c's.
func markLoss(f *report.Finding, w evidence.Window, c report.Finding, what, why, fix string) {
	f.CausedBy, f.CauseSubject = c.ID, c.Subject
	f.Title = fmt.Sprintf("Retransmissions: %.1f%% of TCP segments were retransmitted — %s", 100*retransRatio(w), what)
	f.Evidence = append(f.Evidence, report.Item{Text: why, Source: "netdoctor", Window: true})
	f.Actions = notes(fix)
}

// lossOwner is the finding a drop reason's packets are the evidence of.
func lossOwner(d drop) (report.FindingID, string) {
	if id, ok := dropOwner(d.Reason); ok {
		return id, ""
	}
	return PacketDrops, d.Reason
}

// dropLoss makes a loss the consequence of the finding that names where
// its segments died, when the drop monitor counted, on the same side,
// drops of one such finding's reasons at least half as many as the
// retransmissions: the firewall, a qdisc, the MTU. Without the monitor,
// or with the drops elsewhere, the loss stands on its own with its
// evidence (whereLost).
func dropLoss(fs []report.Finding, f *report.Finding, w evidence.Window) {
	here, _, ok := dropsIn(w)
	if !ok {
		return
	}
	retrans, _ := w.Counter("Tcp.RetransSegs")
	syn, _ := w.Counter("TcpExt.TCPSynRetrans")
	retrans -= min(syn, retrans)
	byOwner := map[report.FindingID]map[string]uint64{}
	for _, d := range here {
		if stray[d.Reason] {
			continue
		}
		id, subject := lossOwner(d)
		if byOwner[id] == nil {
			byOwner[id] = map[string]uint64{}
		}
		byOwner[id][subject] += d.Packets
		if d.Reason == "QDISC_DROP" && d.Iface != "" {
			// A saturated link's qdisc: bandwidth-saturated's subject.
			if byOwner[BandwidthSaturated] == nil {
				byOwner[BandwidthSaturated] = map[string]uint64{}
			}
			byOwner[BandwidthSaturated][d.Iface] += d.Packets
		}
	}
	for _, c := range fs {
		if c.Status != report.Active || c.Side != f.Side || c.ID == PacketLoss {
			continue
		}
		subs := byOwner[c.ID]
		if subs == nil {
			continue
		}
		n := subs[""]
		if c.Subject != "" && c.ID != FirewallDrop && c.ID != PathMTUBlackhole {
			n = subs[c.Subject]
		} else {
			for _, v := range subs {
				n = max(n, v)
			}
		}
		if n == 0 || n*2 < retrans {
			continue
		}
		what := string(c.ID)
		if c.Subject != "" {
			what += " (" + c.Subject + ")"
		}
		markLoss(f, w, c, "dropped where "+what+" says, not on the path", fmt.Sprintf("the drop monitor counted %d of this side's packets dropped where %s says, against %d data retransmissions in the window", n, what, retrans),
			"nothing to fix on the path: the segments died here; fix "+what)
		return
	}
}

// queueLoss reports whether a side's retransmissions are what the queue
// finding c dropped, and says why.
func queueLoss(r *Run, side *Side, c report.Finding) (string, bool) {
	wl, ok := r.Window(side).Window()
	if !ok {
		return "", false
	}
	port := r.Port
	if _, p, err := net.SplitHostPort(cmp.Or(c.About.Listen, c.Subject)); err == nil {
		port = p
	}
	retrans, _ := wl.Counter("Tcp.RetransSegs")
	syn, _ := wl.Counter("TcpExt.TCPSynRetrans")
	retrans -= min(syn, retrans)
	if flows := retransIn(wl); len(flows) > 0 {
		var all, to uint64
		for _, fl := range flows {
			all += fl.Segments
			if strings.HasSuffix(fl.Remote, ":"+port) || strings.HasSuffix(fl.Local, ":"+port) {
				to += fl.Segments
			}
		}
		if to*10 < all*8 {
			return "", false
		}
		return fmt.Sprintf("%d of the %d segments retransmitted in the window (%.0f%%) were on connections to port %s, whose queue overflowed (the drop monitor, by flow)", to, all, 100*float64(to)/float64(all), port), true
	}
	srv := r.Server()
	if srv == nil {
		return "", false
	}
	ws, ok := r.Window(srv).Window()
	if !ok {
		return "", false
	}
	dropped, _ := ws.Counter("TcpExt.ListenDrops")
	if dropped == 0 || retrans > queueRetrans*dropped {
		return "", false
	}
	return fmt.Sprintf("the server's listeners dropped %d connections in the same window (TcpExtListenDrops); each leaves its client retransmitting (its handshake's last ACK, then its request) until the queue takes it: %d retransmitted segments here, %.1f per dropped connection", dropped, retrans, float64(retrans)/float64(dropped)), true
}
