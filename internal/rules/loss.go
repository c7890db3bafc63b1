package rules

import (
	"cmp"
	"fmt"
	"slices"
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
	Doc: `Rule ´loss´ (´loss.go´, ´checkLoss´). It needs two snapshots. Data retransmissions are the rise of
´TcpRetransSegs´ minus the rise of ´TcpExtTCPSynRetrans´, floored at 0. SYN retransmits come from
dropped SYNs, which the listen rules explain. Nothing is reported unless ´TcpOutSegs´ rose by at least
1000.

- **Active, warning** when retransmissions are at least 1 % of the segments sent. **Critical** at 5 %
  or more.
- Evidence: ´754 data retransmissions (TcpRetransSegs minus TcpExtTCPSynRetrans) of 10000 segments
  sent in 1s´, plus ´TcpExtTCPTimeouts´, ´TcpExtTCPLossProbes´, ´TcpExtTCPFastRetrans´ and
  ´TcpExtTCPDSACKRecv´ when they rose.
- **Where the packets die**, with the drop monitor: its drops in the namespace that lose traffic (not the
  strays, see ´packet-drops´), up to three, or ´the drop monitor saw no packet dropped in this namespace
  …: the segments died beyond it´; in a run, the drops of its packets in another namespace of the host;
  and the connections that retransmitted most, with how many of their segments were full-size.
- **What a full queue dropped.** In a run, retransmissions that a full accept queue on the server explains
  are not a lossy path: the client's connection is established on its side while the server dropped the
  handshake's last ACK, so the request behind it is retransmitted until the queue takes it. The rule reads
  it from the server's evidence: a listener whose queue overflowed (its own drop counter rose, or a sample
  had Recv-Q ≥ Send-Q, or ´TcpExtListenOverflows´ rose), and either the drop monitor counted at least
  80 % of the retransmitted segments on connections to that listener's port or, without it, the
  retransmissions are at most 4 for each connection the server's listeners dropped (´TcpExtListenDrops´).
  The finding is then titled ´Retransmissions: 9.7% of TCP segments were retransmitted — what the full
  queue of 10.99.201.1:5000 dropped, not a lossy path´, says why, its fix points to the queue's, and its
  ´dropped´ names the drops (´TCP_LISTEN_OVERFLOW´ at that listener, on the server's side): the
  ´accept-queue-overflow´ about that listener, the class that owns the reason, is its cause
  (´caused_by´), and it is listed under it. Tested by TestRunAcceptOverflowRetransmits (an accept-queue
  overflow on a clean link), TestLossOfAFullQueue and the golden accept-queue-backlog run.
- **What was dropped here.** Otherwise, in ´check´ as in a run, when the drop monitor counted in the
  namespace, for the reasons one finding owns (a class's drop reasons: the firewall's ´NETFILTER_DROP´, a
  saturated link's ´QDISC_DROP´…, or one reason no class owns), at least half as many drops as data
  retransmissions, the segments died here: the title ends ´— dropped in this namespace (QDISC_DROP on
  eth0), not on the path´, the evidence says how many, the fix is what drops them, and the active finding
  that owns those drops on the same side (its class's reason, or ´packet-drops´ about it, on the same
  interface) is its cause. Tested by TestLossOfAQdisc.`,
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
	if l, ok := lostWhere(in, w, retrans); ok {
		f.Title = fmt.Sprintf("Retransmissions: %.1f%% of TCP segments were retransmitted — %s", 100*ratio, l.what)
		f.Evidence = append(f.Evidence, report.Item{Text: l.why, Source: "netdoctor", Window: true})
		f.Actions = notes(l.fix)
		f.Dropped = &l.dropped
	}
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

// lost says where retransmitted segments died, when the evidence shows
// it: what the finding is then (its title's end), why (an evidence
// item), its fix, and the drops as data (Finding.Dropped), by which
// relate names the finding that owns them as the loss's cause.
type lost struct {
	what, why, fix string
	dropped        report.Dropped
}

// lostWhere reads where a side's data retransmissions died: at a full
// accept queue of the run's server, which dropped the handshakes and the
// requests its clients then sent again (queueLost), or in this namespace
// for a reason the drop monitor counted (dropLost). Either way they are
// not a lossy path.
func lostWhere(in *Input, w evidence.Window, retrans uint64) (lost, bool) {
	if l, ok := queueLost(in, w, retrans); ok {
		return l, true
	}
	return dropLost(w, retrans)
}

// queueLost reports retransmissions that are what a full accept queue
// on a run's server dropped, not a lossy path: the client's connection
// is established on its side while the server dropped the handshake's
// last ACK, so its request is retransmitted until the queue takes it.
// With the drop monitor, the retransmitted segments are counted by flow:
// most on connections to the port of a queue that overflowed. Without
// it, the server's listeners dropped enough connections to account for
// them (queueRetrans each).
func queueLost(in *Input, w evidence.Window, retrans uint64) (lost, bool) {
	r := in.Run
	if r == nil || r.Server() == nil {
		return lost{}, false
	}
	sb := r.Window(r.Server())
	sw, ok := sb.Window()
	if !ok {
		return lost{}, false
	}
	dropped, _ := sw.Counter("TcpExt.ListenDrops")
	overflows, _ := sw.Counter("TcpExt.ListenOverflows")
	queues := fullListeners(sb)
	if perListenerDrops(sb) {
		queues = droppedOrFull(sb, queues)
	}
	if len(queues) == 0 && overflows == 0 {
		return lost{}, false
	}
	owner, _ := dropOwner(overflowReason)
	at := func(addr, why string) lost {
		return lost{what: "what the full queue of " + cmp.Or(addr, "the listener") + " dropped, not a lossy path", why: why,
			fix:     "nothing to fix on the path: these are the connections the server's queue dropped; fix the queue (" + string(owner) + ")",
			dropped: report.Dropped{Reason: overflowReason, Listen: addr, Side: r.ServerSide(), Packets: dropped}}
	}
	if flows := retransIn(w); len(flows) > 0 {
		ports := []string{r.Port}
		if len(queues) > 0 {
			ports = nil
			for _, q := range queues {
				ports = append(ports, strconv.Itoa(q.Port))
			}
		}
		for i, port := range ports {
			var all, to uint64
			for _, fl := range flows {
				all += fl.Segments
				if strings.HasSuffix(fl.Remote, ":"+port) || strings.HasSuffix(fl.Local, ":"+port) {
					to += fl.Segments
				}
			}
			if to*10 < all*8 {
				continue
			}
			addr := ""
			if len(queues) > 0 {
				addr = queues[i].Addr
			}
			return at(addr, fmt.Sprintf("%d of the %d segments retransmitted in the window (%.0f%%) were on connections to port %s, whose queue overflowed (the drop monitor, by flow)", to, all, 100*float64(to)/float64(all), port)), true
		}
		return lost{}, false
	}
	if dropped == 0 || retrans > queueRetrans*dropped {
		return lost{}, false
	}
	addr := ""
	if len(queues) > 0 {
		addr = queues[0].Addr
	}
	return at(addr, fmt.Sprintf("the server's listeners dropped %d connections in the same window (TcpExtListenDrops); each leaves its client retransmitting (its handshake's last ACK, then its request) until the queue takes it: %d retransmitted segments here, %.1f per dropped connection", dropped, retrans, float64(retrans)/float64(dropped))), true
}

// overflowReason is the kernel's drop reason of a full accept queue:
// what the drop monitor names the handshakes' last ACKs it drops.
const overflowReason = "TCP_LISTEN_OVERFLOW"

// dropLost reports retransmissions whose segments died in this
// namespace: the drop monitor counted, for the reasons of one finding
// (its class's DropReasons, or one reason no class owns), drops at least
// half as many as the retransmissions. Without the monitor, or with the
// drops elsewhere, the loss stands on its own with its evidence
// (whereLost).
func dropLost(w evidence.Window, retrans uint64) (lost, bool) {
	here, _, ok := dropsIn(w)
	if !ok {
		return lost{}, false
	}
	type group struct {
		n   uint64
		top drop // its busiest row
	}
	groups := map[string]*group{}
	var order []string
	for _, d := range here {
		if stray[d.Reason] {
			continue
		}
		k := d.Reason
		if id, ok := dropOwner(d.Reason); ok {
			k = string(id)
		}
		g := groups[k]
		if g == nil {
			g = &group{top: d}
			groups[k] = g
			order = append(order, k)
		}
		g.n += d.Packets
	}
	if len(order) == 0 {
		return lost{}, false
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(groups[b].n, groups[a].n) })
	g := groups[order[0]]
	if g.n*2 < retrans {
		return lost{}, false
	}
	place := g.top.Reason
	if g.top.Iface != "" {
		place += " on " + g.top.Iface
	}
	fix := "nothing to fix on the path: the segments died here; fix what drops them (the kernel's drop reason " + g.top.Reason
	if id, ok := dropOwner(g.top.Reason); ok {
		fix += ": " + string(id)
	}
	return lost{what: "dropped in this namespace (" + place + "), not on the path",
		why:     fmt.Sprintf("the drop monitor counted %d of this side's packets dropped (%s), against %d data retransmissions in the window", g.n, place, retrans),
		fix:     fix + ")",
		dropped: report.Dropped{Reason: g.top.Reason, Interface: g.top.Iface, Packets: g.n}}, true
}
