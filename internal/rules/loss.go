package rules

import (
	"cmp"
	"fmt"
	"slices"
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
  strays, see ´packet-drops´), up to three; the drops of its own connections elsewhere on the host, by flow
  (the drop monitor's ledger: a connection of this namespace, or of a run's other side, before or after NAT;
  never another namespace's drops on the same port number); or ´the drop monitor saw no packet of this
  namespace's connections dropped on this host …: the segments died beyond it´; and the connections that
  retransmitted most, with how many of their segments were full-size and the flow their client opened when
  NAT changed it.
- **What a full queue dropped.** Retransmissions that a full accept queue explains are not a lossy path:
  the client's connection is established on its side while the server dropped the handshake's last ACK, so
  the request behind it is retransmitted until the queue takes it. With the drop monitor, by flow: the
  ledger holds the queue's drops (´TCP_LISTEN_OVERFLOW´, and ´NO_SOCKET´ in ´cookie_v4_check´: a SYN
  cookie's ACK finding the accept queue full) with the client flow each was of, followed through NAT (a
  router that DNATs a virtual IP to the server: the client retransmits to the VIP what the server dropped
  addressed to itself, and the router's conntrack says they are one connection); when the retransmitting
  connections matched one by one, with those to the same listener (the address its clients opened, or its
  own) whose drops the ledger's bounded lists left out, carry at least 80 % of the segments retransmitted,
  they are the queue's. The SYNs a full queue refuses are consumed without a drop: when the ledger holds no
  drop of a full queue at all, or without the monitor, a run's server whose listener overflowed (its own
  drop counter rose, or a sample had Recv-Q ≥ Send-Q, or ´TcpExtListenOverflows´ rose) and whose listeners
  dropped at least a quarter as many connections as the retransmissions (´TcpExtListenDrops´, 4 each)
  accounts for them. The finding is then titled ´Retransmissions: 9.7% of TCP segments were retransmitted —
  what the full queue of 10.99.201.1:5000 dropped, not a lossy path´, says why, its fix points to the
  queue's, and its ´dropped´ names the drops (´TCP_LISTEN_OVERFLOW´ at that listener, on the server's
  side): the ´accept-queue-overflow´ about that listener, the class that owns the reason, is its cause
  (´caused_by´), and it is listed under it. Tested by TestPaired/RunAcceptOverflowRetransmits (an accept-queue
  overflow on a clean link), TestPaired/RunDNATOverflowRetransmits (the same behind a DNAT router, a Python
  server and a Go one), TestLossOfAFullQueue, TestLossOfAQueueBehindNAT and the golden
  accept-queue-backlog run.
- **What the receivers had.** Retransmissions whose segments the ledger shows reaching their receivers,
  whose sockets dropped them (´TCP_OLD_DATA´: data they already had, ´TCP_OLD_SEQUENCE´,
  ´TCP_ZEROWINDOW´, ´TCP_OVERWINDOW´: the receivers' windows closed), for at least half of the segments,
  are the receivers', not the path's: the title ends ´— data its receivers already had or could not take
  (their windows closed), not a lossy path´, and the finding that names the receivers
  (´receiver-window-limited´, whose ´about.drop_reason´ is the reason they dropped most) is its cause.
  Tested by TestSlowReceiversNotThePath and TestCheckSlowReceiversNamed.
- **What was dropped here.** Otherwise, in ´check´ as in a run, when the drop monitor counted in the
  namespace, for the reasons one finding owns (a class's drop reasons: the firewall's ´NETFILTER_DROP´, a
  saturated link's ´QDISC_DROP´…, or one reason no class owns), at least half as many drops as data
  retransmissions, the segments died here: the title ends ´— dropped in this namespace (QDISC_DROP on
  eth0), not on the path´, the evidence says how many, the fix is what drops them, and the active finding
  that owns those drops on the same side (its class's reason, or ´packet-drops´ about it, on the same
  interface) is its cause. Tested by TestLossOfAQdisc.
- **What was dropped elsewhere on this host.** Otherwise, when the ledger has, for connections carrying at
  least half of the segments retransmitted, their packets dropped by one place in another namespace of the
  host (a router, a bridge between the two ends), the title ends ´— dropped on this host, in network
  namespace router (QDISC_DROP on r-s)´ and the finding that names those drops there is its cause. What no
  drop on the host explains is left to the path.`,
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
// the drops of its own flows elsewhere on the host (by flow, before or
// after NAT: never another service's drops on the same port number),
// and the connections that retransmitted most. When it saw no such
// drop, the packets died beyond the namespaces it sees.
func whereLost(in *Input, w evidence.Window) []report.Item {
	here, _, ok := dropsIn(w)
	if !ok {
		return nil
	}
	var out []report.Item
	for _, d := range here {
		if !stray[d.Reason] && len(out) < 3 {
			out = append(out, report.Item{Text: "where packets die: " + dropText(d, w), Source: dropSource, Window: true})
		}
	}
	rows, _, _ := hostLedger(in, w)
	own := ownFlows(in)
	n := 0
	for _, d := range rows {
		if d.NetNS != 0 && own[d.Client().Key()] && !stray[d.Reason] && !receiverDrop(d) && n < 3 {
			out = append(out, report.Item{Text: "where its packets die elsewhere on this host: " + flowText(d, w), Source: dropSource, Window: true})
			n++
		}
	}
	if len(out) == 0 {
		out = append(out, report.Item{Text: "the drop monitor saw no packet of this namespace's connections dropped on this host for a reason that loses traffic (only strays, if any): the segments died beyond it, on the path or at the peer", Source: dropSource, Window: true})
	}
	for i, f := range retransIn(w) {
		if i == 3 {
			break
		}
		t := fmt.Sprintf("%s → %s retransmitted %d segments (%d of them full-size, up to %d bytes)", f.Local, f.Remote, f.Segments, f.Full, f.MaxLen)
		if o := f.Orig; o != nil && o.Key() != f.Flow().Key() {
			t += fmt.Sprintf("; opened as %s → %s", o.Src, o.Dst)
			if f.ViaNetNSName != "" {
				t += " (conntrack of " + f.ViaNetNSName + ")"
			}
		}
		out = append(out, report.Item{Text: t, Source: dropSource, Window: true})
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
// accept queue, which dropped the handshakes and the requests its
// clients then sent again (queueLost); at their receivers, which had
// them already or refused them (receiverLost); or on this host for a
// reason the drop monitor counted, here or, by flow, in another of its
// namespaces (dropLost, hostLost). Only what none of them explains is
// left to the path.
func lostWhere(in *Input, w evidence.Window, retrans uint64) (lost, bool) {
	if l, ok := queueLost(in, w, retrans); ok {
		return l, true
	}
	if l, ok := receiverLost(in, w); ok {
		return l, true
	}
	if l, ok := dropLost(w, retrans); ok {
		return l, true
	}
	return hostLost(in, w)
}

// queueDrop reports a drop of a full accept queue: the handshake's last
// ACK (or a request behind it) a listener whose queue was full dropped,
// or, the SYN queue following the backlog, the ACK of a SYN cookie that
// found the accept queue full (NO_SOCKET in cookie_v4_check). The SYNs a
// full queue refuses are consumed without a drop: the ledger never sees
// them (the listeners' own drop counters do).
func queueDrop(d flowDrop) bool {
	return d.Reason == overflowReason || d.Reason == "NO_SOCKET" && (d.Location == "cookie_v4_check" || d.Location == "cookie_v6_check")
}

// queueLost reports retransmissions that are what a full accept queue
// dropped, not a lossy path: the client's connection is established on
// its side while the server dropped the handshake's last ACK, so its
// request is retransmitted until the queue takes it. With the drop
// monitor, by flow: the retransmitting connections are those whose
// packets a full queue dropped, in any namespace of the host and
// through NAT (a router that DNATs a virtual IP to the server: the
// client retransmits to the VIP what the server dropped addressed to
// itself). Without it, or when the ledger holds none of their drops (its
// lists are bounded), the run's server's listeners dropped enough
// connections to account for them (queueRetrans each).
func queueLost(in *Input, w evidence.Window, retrans uint64) (lost, bool) {
	flows := retransIn(w)
	rows, _, ok := hostLedger(in, w)
	if len(flows) == 0 || !ok {
		return queueCountLost(in, w, retrans)
	}
	// The queue's drops by client flow, and the listener's ends: the
	// address its clients opened (a VIP before NAT) and its own.
	q := map[evidence.FlowKey]flowDrop{}
	ends := map[string]bool{}
	for _, d := range rows {
		if !queueDrop(d) {
			continue
		}
		k := d.Client().Key()
		if prev, seen := q[k]; !seen || d.Reason == overflowReason && prev.Reason != overflowReason {
			q[k] = d
		}
		ends[d.Client().Dst] = true
		if d.SocketPort != 0 && !d.FromSocket {
			ends[d.Flow.Dst] = true
		}
	}
	if len(q) == 0 {
		// The ledger saw no drop of a full queue: the SYNs it refuses are
		// consumed without one; the counters may still account for them.
		return queueCountLost(in, w, retrans)
	}
	var to, matched, all uint64
	var top flowDrop
	for _, f := range flows {
		all += f.Segments
		c := f.Client()
		if d, ok := q[c.Key()]; ok {
			to += f.Segments
			matched++
			if top.Flow.Dst == "" || d.Reason == overflowReason && top.Reason != overflowReason {
				top = d
			}
			continue
		}
		// A connection to the same listener whose own drop the ledger's
		// bounded lists left out: the queue's too.
		if ends[c.Src] || ends[c.Dst] {
			to += f.Segments
		}
	}
	if matched == 0 || to*10 < all*8 {
		return lost{}, false
	}
	return queueFlowLost(in, top, to, all, matched), true
}

// queueFlowLost is queueLost's finding by flow: top is a drop of the
// queue, the listener's address its packet's destination after NAT.
func queueFlowLost(in *Input, top flowDrop, to, all, conns uint64) lost {
	owner, _ := dropOwner(overflowReason)
	addr := ""
	if top.SocketPort != 0 {
		addr = top.Flow.Dst
	}
	side := in.Side
	if top.NetNS != 0 {
		side = sideOfNS(in, top.NetNS)
	}
	where := "the full queue of " + cmp.Or(addr, "a listener")
	if top.NetNS != 0 && side == "" {
		where += " (network namespace " + flowNS(top) + ")"
	}
	why := fmt.Sprintf("%d of the %d segments retransmitted in the window (%.0f%%) were on connections to the listener whose handshakes or requests %s dropped (%s; %d of them matched one by one): the drop monitor's ledger, by flow", to, all, 100*float64(to)/float64(all), where, top.Reason, conns)
	if o := top.Orig; o != nil && o.Key() != top.Flow.Key() {
		why += fmt.Sprintf(", followed through NAT: the client opened %s → %s", o.Src, o.Dst)
		if top.ViaNetNSName != "" {
			why += " (conntrack of " + top.ViaNetNSName + ")"
		}
	}
	return lost{what: "what " + where + " dropped, not a lossy path", why: why,
		fix:     "nothing to fix on the path: these are the connections the server's queue dropped; fix the queue (" + string(owner) + ")",
		dropped: report.Dropped{Reason: overflowReason, Listen: addr, Side: side, Packets: conns}}
}

// sideOfNS is the side of a run whose namespace is ns (an inode), ""
// when none is: a drop elsewhere on the host.
func sideOfNS(in *Input, ns uint64) report.Side {
	if in.Run == nil {
		return ""
	}
	for _, s := range observed(in.Run) {
		if s.Bundle != nil && s.Bundle.Host.NetNSInode == ns {
			return sideName(s)
		}
	}
	return ""
}

// queueCountLost is queueLost without the ledger: a run's server whose
// queue overflowed and whose listeners dropped enough connections to
// account for the retransmissions.
func queueCountLost(in *Input, w evidence.Window, retrans uint64) (lost, bool) {
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
	if len(queues) == 0 && overflows == 0 || dropped == 0 || retrans > queueRetrans*dropped {
		return lost{}, false
	}
	owner, _ := dropOwner(overflowReason)
	addr := ""
	if len(queues) > 0 {
		addr = queues[0].Addr
	}
	return lost{what: "what the full queue of " + cmp.Or(addr, "the listener") + " dropped, not a lossy path",
		why:     fmt.Sprintf("the server's listeners dropped %d connections in the same window (TcpExtListenDrops); each leaves its client retransmitting (its handshake's last ACK, then its request) until the queue takes it: %d retransmitted segments here, %.1f per dropped connection", dropped, retrans, float64(retrans)/float64(dropped)),
		fix:     "nothing to fix on the path: these are the connections the server's queue dropped; fix the queue (" + string(owner) + ")",
		dropped: report.Dropped{Reason: overflowReason, Listen: addr, Side: r.ServerSide(), Packets: dropped}}, true
}

// overflowReason is the kernel's drop reason of a full accept queue:
// what the drop monitor names the handshakes' last ACKs it drops.
const overflowReason = "TCP_LISTEN_OVERFLOW"

// receiverLost reports retransmissions that reached their receivers:
// the ledger has, for at least half of the segments retransmitted, the
// receiving socket of the same flow dropping them as data it already had
// or beyond its window (receiverDrop): the sender's timer fired while
// the receivers' windows were closed. The path carried them.
func receiverLost(in *Input, w evidence.Window) (lost, bool) {
	flows := retransIn(w)
	if len(flows) == 0 {
		return lost{}, false
	}
	fs := fatesOf(in, w, flows)
	var at, all, conns uint64
	var rows []flowDrop
	for _, f := range flows {
		all += f.Segments
		k := f.Client().Key()
		if fs.by[k] != fateReceiver {
			continue
		}
		at += f.Segments
		conns++
		for _, d := range fs.drops[k] {
			if receiverDrop(d) {
				rows = append(rows, d)
			}
		}
	}
	if at == 0 || at*2 < all || len(rows) == 0 {
		return lost{}, false
	}
	slices.SortStableFunc(rows, func(a, b flowDrop) int { return cmp.Compare(b.Packets, a.Packets) })
	d := droppedOf(rows, "")
	d.Reason = receiverReason(rows)
	return lost{what: "data its receivers already had or could not take (their windows closed), not a lossy path",
		why: fmt.Sprintf("%d of the %d segments retransmitted in the window (%.0f%%), on %d connection(s), reached their receivers, whose sockets dropped them (%s, %s): the drop monitor's ledger, by flow; the path carried them",
			at, all, 100*float64(at)/float64(all), conns, receiverReasonsOf(rows), flowPlace(rows[0])),
		fix:     "nothing to fix on the path: the receivers read more slowly than this side sends; the finding about them says which",
		dropped: d}, true
}

// receiverReasonsOf says which receiver drops rows hold: "TCP_OLD_DATA
// 40, TCP_OLD_SEQUENCE 12".
func receiverReasonsOf(rows []flowDrop) string {
	n := map[string]uint64{}
	for _, d := range rows {
		n[d.Reason] += d.Packets
	}
	return reasonCounts(n)
}

// hostLost reports retransmissions whose drops the ledger found
// elsewhere on the host, by flow (a router, a bridge between the two
// ends): at least half of the segments retransmitted were on
// connections whose packets one place dropped. They died on the path,
// and the path is on this host: the finding that owns those drops is
// their cause.
func hostLost(in *Input, w evidence.Window) (lost, bool) {
	flows := retransIn(w)
	if len(flows) == 0 {
		return lost{}, false
	}
	fs := fatesOf(in, w, flows)
	type group struct {
		segs uint64
		rows []flowDrop
	}
	groups := map[string]*group{}
	var order []string
	var all uint64
	for _, f := range flows {
		all += f.Segments
		k := f.Client().Key()
		if fs.by[k] == fateUnexplained || fs.by[k] == fateReceiver {
			continue
		}
		var ds []flowDrop
		for _, d := range fs.drops[k] {
			if !queueDrop(d) { // a full queue's: queueLost's
				ds = append(ds, d)
			}
		}
		if len(ds) == 0 {
			continue
		}
		slices.SortStableFunc(ds, func(a, b flowDrop) int { return cmp.Compare(b.Packets, a.Packets) })
		top := ds[0]
		if top.NetNS == 0 {
			continue // this namespace's: dropLost's
		}
		g := flowNS(top) + " " + top.Reason + " " + top.Iface
		if groups[g] == nil {
			groups[g] = &group{}
			order = append(order, g)
		}
		groups[g].segs += f.Segments
		groups[g].rows = append(groups[g].rows, top)
	}
	if len(order) == 0 {
		return lost{}, false
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(groups[b].segs, groups[a].segs) })
	g := groups[order[0]]
	if g.segs*2 < all {
		return lost{}, false
	}
	top := g.rows[0]
	side := sideOfNS(in, top.NetNS)
	if side == "" && in.Run != nil {
		side = elsewhereSide(in.Run)
	}
	return lost{what: "dropped on this host, in network namespace " + flowNS(top) + " (" + top.Reason + cmp.Or(" on "+top.Iface, "") + ")",
		why: fmt.Sprintf("%d of the %d segments retransmitted in the window (%.0f%%) were on connections whose packets network namespace %s dropped: %s",
			g.segs, all, 100*float64(g.segs)/float64(all), flowNS(top), flowText(top, w)),
		fix:     "fix what drops them there: " + flowPlace(top),
		dropped: droppedOf(g.rows, side)}, true
}

// elsewhereSide is the side of a run that names the drops of its flows
// in the host's other namespaces: the server's when it is observed,
// else the client's (both sides' snapshots list them).
func elsewhereSide(r *evidence.Run) report.Side {
	if r.Server() != nil {
		return r.ServerSide()
	}
	return report.Client
}

// namesElsewhere reports whether this input names the drops of a run's
// flows elsewhere on the host: once, from elsewhereSide; always outside
// a run.
func namesElsewhere(in *Input) bool {
	return in.Run == nil || in.Side != report.Client || in.Run.Server() == nil
}

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
