package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// The drop monitor's ledger as the rules read it: every drop and every
// retransmission tied to its flow, followed through NAT to the flow its
// client opened (FlowDrop.Client, Retrans.Client). A drop is a
// service's only when its flow is one of the service's connections —
// its clients', its listener's, its dependencies' — before or after NAT:
// never by a port number, which another namespace's service may share.
// What the host's other namespaces drop of other flows stays "elsewhere
// on this host": in the bundle's ledger_elsewhere, never a finding about
// this service.

// flowDrop is a ledger row that rose in the window: Packets and Bytes
// are the rise.
type flowDrop = evidence.FlowDrop

// flowSet is a set of flows, whichever way their packets go.
type flowSet map[evidence.FlowKey]bool

// ledgerIn returns the ledger's rows that rose in the window: the
// namespace's own (here) and those of the host's other namespaces
// (elsewhere), busiest first; ok is false when the monitor did not count
// in both snapshots. A row absent from the first snapshot counts from 0.
func ledgerIn(w evidence.Window) (here, elsewhere []flowDrop, ok bool) {
	a, b := w.First.Drops, w.Last.Drops
	if a == nil || b == nil || a.Unavailable != "" || b.Unavailable != "" || !a.Since.Equal(b.Since) {
		return nil, nil, false
	}
	return roseFlows(a.Ledger, b.Ledger), roseFlows(a.LedgerElsewhere, b.LedgerElsewhere), true
}

// roseFlows is what each ledger row of last rose by since first.
func roseFlows(first, last []flowDrop) []flowDrop {
	before := make(map[evidence.FlowDropKey]flowDrop, len(first))
	for _, d := range first {
		before[d.Key()] = d
	}
	var out []flowDrop
	for _, d := range last {
		f := before[d.Key()]
		if d.Packets <= f.Packets {
			continue
		}
		d.Packets, d.Bytes = d.Packets-f.Packets, d.Bytes-min(f.Bytes, d.Bytes)
		out = append(out, d)
	}
	slices.SortStableFunc(out, func(a, b flowDrop) int { return cmp.Compare(b.Packets, a.Packets) })
	return out
}

// ownFlows are the flows of the service the input observes, as their
// clients opened them: every connection of its namespace that the drop
// monitor saw retransmit or lose a packet, and in a run those of the
// other side too (the load's connections, whichever end saw them).
// The lists are cumulative since the monitor started: a connection is
// the service's whenever it was seen.
func ownFlows(in *Input) flowSet {
	out := flowSet{}
	add := func(b *evidence.Bundle) {
		if b == nil || len(b.Snapshots) == 0 {
			return
		}
		d := b.Snapshots[len(b.Snapshots)-1].Drops
		if d == nil || d.Unavailable != "" {
			return
		}
		for _, r := range d.Retrans {
			out[r.Client().Key()] = true
		}
		for _, l := range d.Ledger {
			out[l.Client().Key()] = true
		}
	}
	add(in.Bundle)
	if in.Run != nil {
		for _, s := range observed(in.Run) {
			if s.Bundle != in.Bundle {
				add(s.Bundle)
			}
		}
	}
	return out
}

// ownElsewhere keeps the drops elsewhere on the host that are of the
// service's own flows (ownFlows).
func ownElsewhere(in *Input, elsewhere []flowDrop) []flowDrop {
	own := ownFlows(in)
	var out []flowDrop
	for _, d := range elsewhere {
		if own[d.Client().Key()] {
			out = append(out, d)
		}
	}
	return out
}

// hostLedger is every drop of the window the input sees on its host:
// its namespace's (NetNS 0), the other namespaces', and in a run the
// other observed side's own ledger, named with its namespace, when that
// side is another namespace of the same running kernel (its rows are the
// same drops as those listed elsewhere, and may list more). links
// describe the devices of all of them. ok is false without the monitor.
func hostLedger(in *Input, w evidence.Window) (rows []flowDrop, links []evidence.Link, ok bool) {
	here, elsewhere, ok := ledgerIn(w)
	if !ok {
		return nil, nil, false
	}
	rows = append(slices.Clone(here), elsewhere...)
	links = linksOf(w.Last)
	if in.Run == nil {
		return rows, links, true
	}
	host := in.Bundle.Host
	at := map[evidence.FlowDropKey]int{}
	for i, d := range rows {
		at[d.Key()] = i
	}
	for _, s := range observed(in.Run) {
		if sideName(s) == in.Side {
			continue
		}
		b := in.Run.Window(s)
		other := b.Host
		if other.BootID == "" || other.BootID != host.BootID || other.NetNSInode == 0 || other.NetNSInode == host.NetNSInode {
			continue
		}
		sw, ok := b.Window()
		if !ok {
			continue
		}
		h, _, ok := ledgerIn(sw)
		if !ok {
			continue
		}
		for _, d := range h {
			d.NetNS, d.NetNSName = other.NetNSInode, other.NetNS
			if i, dup := at[d.Key()]; dup {
				rows[i].Packets = max(rows[i].Packets, d.Packets)
				continue
			}
			at[d.Key()] = len(rows)
			rows = append(rows, d)
		}
		for _, l := range linksOf(sw.Last) {
			if l.NetNS == 0 {
				l.NetNS, l.NetNSName = other.NetNSInode, other.NetNS
			}
			links = append(links, l)
		}
	}
	return rows, links, true
}

// flowPlace says where a ledger row's packets died: "IP_OUTNOROUTES by
// __ip_queue_xmit on eth0 in network namespace nb".
func flowPlace(d flowDrop) string {
	var b strings.Builder
	b.WriteString(d.Reason)
	if d.Location != "" {
		b.WriteString(" by " + d.Location)
	}
	if d.Iface != "" {
		b.WriteString(" on " + d.Iface)
	}
	if d.NetNS != 0 {
		b.WriteString(" in network namespace " + flowNS(d))
	}
	return b.String()
}

// flowNS names a ledger row's namespace: its `ip netns` name, or its
// inode as the kernel prints it.
func flowNS(d flowDrop) string {
	if d.NetNSName != "" {
		return d.NetNSName
	}
	return fmt.Sprint(d.NetNS)
}

// flowText is a ledger row for a person: "NETFILTER_DROP: 40 tcp
// packets of 10.0.1.1:41000 → 10.0.0.2:80 (opened as … → 10.9.0.80:80,
// conntrack of router) dropped in 2s by nft_do_chain on eth0 in network
// namespace router".
func flowText(d flowDrop, w evidence.Window) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d %s packets of %s → %s", d.Reason, d.Packets, cmp.Or(d.Flow.Proto, "?"), d.Flow.Src, d.Flow.Dst)
	if d.FromSocket {
		b.WriteString(" (its socket's flow)")
	}
	if o := d.Orig; o != nil && o.Key() != d.Flow.Key() {
		fmt.Fprintf(&b, " (opened as %s → %s", o.Src, o.Dst)
		if d.ViaNetNSName != "" {
			b.WriteString(", conntrack of " + d.ViaNetNSName)
		}
		b.WriteString(")")
	}
	fmt.Fprintf(&b, " dropped in %s", round(w))
	if d.Location != "" {
		b.WriteString(" by " + d.Location)
	}
	if d.Iface != "" {
		b.WriteString(" on " + d.Iface)
	}
	if d.NetNS != 0 {
		b.WriteString(" in network namespace " + flowNS(d))
	}
	if d.MaxLen > 0 {
		fmt.Fprintf(&b, ", up to %d bytes", d.MaxLen)
	}
	return b.String()
}

// receiverReasons are the drops of a segment by the socket it reached:
// data it already had (TCP_OLD_DATA: the sender retransmitted what had
// arrived, its timer having fired while the receiver's window was
// closed), a window probe (TCP_OLD_SEQUENCE), a segment beyond a closed
// or full window (TCP_ZEROWINDOW, TCP_OVERWINDOW). The path carried
// them: a retransmission its receiver drops so is the receiver's, never
// the path's.
var receiverReasons = map[string]bool{
	"TCP_OLD_DATA": true, "TCP_OLD_SEQUENCE": true, "TCP_ZEROWINDOW": true, "TCP_OVERWINDOW": true,
}

// receiverDrop reports a drop by the receiving socket of its flow.
func receiverDrop(d flowDrop) bool {
	return receiverReasons[d.Reason] && d.SocketPort != 0
}

// receiverReason is the reason the receivers dropped most packets of
// rows for (ties by name): what a finding about them and a finding their
// drops explain both name (About.DropReason, Dropped.Reason), by which
// relate ties the two.
func receiverReason(rows []flowDrop) string {
	n := map[string]uint64{}
	for _, d := range rows {
		if receiverDrop(d) {
			n[d.Reason] += d.Packets
		}
	}
	best := ""
	for r, c := range n {
		if best == "" || c > n[best] || c == n[best] && r < best {
			best = r
		}
	}
	return best
}

// layer2Places are the kernel functions that check a frame against the
// MTU of the device it is forwarded to at layer 2 — a bridge's port
// (br_dev_queue_push_xmit, or br_netfilter's br_nf_dev_queue_xmit
// first), a veth's peer (__dev_forward_skb, veth_xmit) — and drop what
// does not fit, with no router to send ICMP "fragmentation needed". A
// GSO packet passes them whatever its size: what they drop is a frame
// sent whole.
var layer2Places = map[string]bool{
	"br_nf_dev_queue_xmit": true, "br_dev_queue_push_xmit": true, "__dev_forward_skb": true, "__dev_forward_skb2": true,
	"dev_forward_skb": true, "dev_forward_skb_nomtu": true, "veth_xmit": true, "veth_forward_skb": true, "is_skb_forwardable": true,
}

// l2Header is the most a frame's link header may add to its packet
// (Ethernet and one VLAN tag), whichever the kernel counted.
const l2Header = 18

// oversize is a drop of frames too large for a device at layer 2: at
// a place that checks the MTU (layer2Places), the largest frame above
// the MTU of the device it was on, or of that device's peer. It returns
// the MTU the frames exceeded, and the device described (nil when the
// snapshot does not describe it).
func oversize(d flowDrop, links []evidence.Link) (int, *evidence.Link, bool) {
	if !layer2Places[d.Location] || d.MaxLen == 0 {
		return 0, nil, false
	}
	l := linkOf(d, links)
	if l == nil {
		return 0, nil, false
	}
	switch {
	case l.MTU > 0 && int(d.MaxLen) > l.MTU+l2Header:
		return l.MTU, l, true
	case l.Peer != nil && l.Peer.MTU > 0 && int(d.MaxLen) > l.Peer.MTU+l2Header:
		return l.Peer.MTU, l, true
	}
	return 0, l, false
}

// linkOf is the description of the device a drop was on: by index, else
// by name, in its namespace.
func linkOf(d flowDrop, links []evidence.Link) *evidence.Link {
	for i := range links {
		l := &links[i]
		if l.NetNS == d.NetNS && (d.Ifindex != 0 && l.Index == d.Ifindex || d.Ifindex == 0 && d.Iface != "" && l.Name == d.Iface) {
			return l
		}
	}
	return nil
}

// linksOf are the devices the snapshot describes: its namespace's own
// (Interfaces[].Link) and those of the drops elsewhere (Drops.Links).
func linksOf(s *evidence.Snapshot) []evidence.Link {
	var out []evidence.Link
	for _, i := range s.Interfaces {
		if i.Link != nil {
			out = append(out, *i.Link)
		}
	}
	if s.Drops != nil {
		out = append(out, s.Drops.Links...)
	}
	return out
}

// flowFate is what the ledger says happened to one flow's retransmitted
// segments on this host.
type flowFate int

const (
	// fateUnexplained: no drop of the flow on this host: it died beyond the
	// namespaces the monitor sees, on the path or at a remote peer.
	fateUnexplained flowFate = iota
	// fateReceiver: its receiver had them or refused them (receiverDrop):
	// the path carried them.
	fateReceiver
	// fateTooBig: a device on this host dropped its frames as larger than
	// its MTU, at layer 2 (oversize).
	fateTooBig
	// fateRouterTooBig: a router on this host dropped them as larger than
	// the next hop's MTU (PKT_TOO_BIG), whose ICMP should have told the
	// sender.
	fateRouterTooBig
	// fateDropped: dropped on this host for another reason (a qdisc,
	// a firewall, a route): that place is the cause.
	fateDropped
)

// fates reads, for each retransmitting flow, what the ledger says of
// its packets: the drops of the same client flow here, elsewhere on the
// host, and in a run on the other side. A flow's fate is its busiest
// drop's; strays that do not lose traffic are left out.
type fates struct {
	by map[evidence.FlowKey]flowFate
	// drops are the rows that decided each flow's fate.
	drops map[evidence.FlowKey][]flowDrop
}

// fatesOf reads, in the ledger of the input's host (hostLedger), what
// happened to the flows given.
func fatesOf(in *Input, w evidence.Window, flows []flowRetrans) fates {
	out := fates{by: map[evidence.FlowKey]flowFate{}, drops: map[evidence.FlowKey][]flowDrop{}}
	rows, links, ok := hostLedger(in, w)
	if !ok {
		return out
	}
	want := flowSet{}
	for _, f := range flows {
		want[f.Client().Key()] = true
	}
	best := map[evidence.FlowKey]uint64{}
	for _, d := range rows {
		k := d.Client().Key()
		if !want[k] {
			continue
		}
		var f flowFate
		switch _, _, big := oversize(d, links); {
		case receiverDrop(d):
			f = fateReceiver
		case big:
			f = fateTooBig
		case d.Reason == "PKT_TOO_BIG":
			f = fateRouterTooBig
		case stray[d.Reason]:
			continue
		default:
			f = fateDropped
		}
		out.drops[k] = append(out.drops[k], d)
		if d.Packets > best[k] {
			best[k], out.by[k] = d.Packets, f
		}
	}
	return out
}

// droppedOf is the Dropped of a set of ledger rows for relate: the busiest
// row's reason and place.
func droppedOf(ds []flowDrop, side report.Side) report.Dropped {
	top := ds[0]
	var n uint64
	for _, d := range ds {
		n += d.Packets
	}
	return report.Dropped{Reason: top.Reason, Interface: top.Iface, Side: side, Packets: n}
}
