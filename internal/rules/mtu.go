package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// MTUMismatch: two devices of one layer-2 segment disagree on the MTU
// (a veth and its peer, a bridge's ports, a tunnel over its lower
// device): frames the larger one sends whole are dropped by the
// smaller, and no router is there to say so.
const MTUMismatch report.FindingID = "mtu-mismatch"

var _ = define(Class{ID: MTUMismatch,
	PathFault: true,
	Critical:  true,
	Errors:    true, Delays: true, Latency: true, Fails: FailsConnections,
	Meaning:    "devices of one layer-2 segment disagree on the MTU (a veth and its peer, a bridge's ports, a tunnel and its lower device): the larger one's full frames are dropped by the smaller, with no router to send ICMP",
	Active:     "the drop monitor's ledger has ≥ 10 frames of the service's flows dropped where the kernel checks a frame against the next device's MTU at layer 2, each larger than that device's (or its peer's) MTU (critical)",
	LatentWhen: "none",
	Seed:       "— (jumbo frames on the hosts, a bridge or switch port left at 1500)",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´mtu´ (´mtu.go´, ´checkMTU´). It needs the drop monitor's ledger and the devices' descriptions
(´interfaces[].link´, ´drops.links´: a veth's peer wherever it is, a bridge's ports, a tunnel's overhead).
Where a frame is forwarded at layer 2 the kernel checks it against the MTU of the device it goes to — a
bridge's port (´br_dev_queue_push_xmit´, or br_netfilter's ´br_nf_dev_queue_xmit´ first), a veth's peer
(´__dev_forward_skb´, ´veth_xmit´) — and frees what does not fit (´NOT_SPECIFIED´ on 6.18), counted on
no interface a user looks at first and answered by no ICMP: no router is there. A GSO packet passes
those checks whatever its size (virtual devices hand it on whole): what they drop is a frame sent whole,
as by endpoints that segment themselves (´gso_max_segs 1´, NICs without TSO). Small packets pass, the
connection opens, large answers never arrive; the sender retransmits full-size segments.

- **Active, critical** when, in the window, at least 10 frames were dropped at such a place, each
  larger (its ´max_len´, less 18 bytes of link header) than the MTU of the device it was on or of that
  device's peer: in this namespace, or, by flow, the service's own frames in another namespace of the
  host (named once, from the server's side of a run when it is observed). Subject: the device with the
  smaller MTU (´about.interface´).
- Title and evidence name both MTUs: the device that drops with its kind, namespace, MTU, peer and
  bridge (´ndpc-1 (veth, MTU 1500, a port of bridge ndbr-1 whose ports are ndps-1 9000, ndpc-1 1500;
  its peer ndc-1 in network namespace cli, MTU 9000)´), the frames' size, the ledger's rows with their
  flows, this namespace's devices that send frames that large, and the retransmissions of full-size
  segments they cost.
- Fix, on the side to change: the device whose MTU is the odd one out (its peer and its bridge's other
  ports carry the larger one) raised to the others' (´ip netns exec br ip link set dev ndpc-1 mtu 9000´);
  or, where the smaller MTU is the segment's real limit (a switch port, a provider's link), the
  senders' devices lowered to it (´ip link set dev nds-1 mtu 1500´). Every device of one layer-2 segment
  needs the same MTU; path MTU discovery cannot help at layer 2.

´path-mtu-blackhole´ and ´packet-drops´ leave these drops to it. Tested by TestCheckBridgeMTUMismatch:
endpoints on jumbo frames (9000, ´gso_max_segs 1´) across a bridge whose port to the client is 1500, a
Python streaming server and nginx.`,
})

var _ = register(Rule{Name: "mtu", Order: 155, Scope: PerSide, IDs: []report.FindingID{MTUMismatch}, Checks: "the MTUs of the devices that dropped frames", Check: checkMTU,
	Looks: func(s *evidence.Snapshot) bool { return s.Drops != nil && s.Drops.Unavailable == "" }})

// minOversize is how many oversized frames make a mismatch: each is a
// stalled answer already, but a handful may be a test's ping.
const minOversize = 10

// oversized is one device's drops of frames above its MTU.
type oversized struct {
	link  *evidence.Link
	mtu   int // the MTU the frames exceeded: the device's or its peer's
	rows  []flowDrop
	n     uint64
	frame uint32
}

// checkMTU finds the frames dropped for their size at layer 2, and the
// devices that disagree.
func checkMTU(in *Input) []report.Finding {
	w, ok := in.Bundle.Window()
	if !ok {
		return nil
	}
	here, elsewhere, ok := ledgerIn(w)
	if !ok {
		return nil
	}
	links := linksOf(w.Last)
	rows := here
	if namesElsewhere(in) {
		rows = append(slices.Clone(here), ownElsewhere(in, elsewhere)...)
	}
	by := map[*evidence.Link]*oversized{}
	var order []*evidence.Link
	for _, d := range rows {
		mtu, l, big := oversize(d, links)
		if !big {
			continue
		}
		o := by[l]
		if o == nil {
			o = &oversized{link: l, mtu: mtu}
			by[l] = o
			order = append(order, l)
		}
		o.rows = append(o.rows, d)
		o.n += d.Packets
		o.frame = max(o.frame, d.MaxLen)
	}
	var out []report.Finding
	for _, l := range order {
		if o := by[l]; o.n >= minOversize {
			out = append(out, mismatch(in, w, o, links))
		}
	}
	return out
}

// mismatch is the finding about one device's oversized drops.
func mismatch(in *Input, w evidence.Window, o *oversized, links []evidence.Link) report.Finding {
	l := o.link
	// The device with the smaller MTU: the one the frames were on, or its
	// peer (a veth checks its peer's MTU).
	small, smallNS, smallNSName := l.Name, l.NetNS, l.NetNSName
	if o.mtu != l.MTU && l.Peer != nil {
		small = l.Peer.Name
		if l.Peer.NetNS != 0 {
			smallNS, smallNSName = l.Peer.NetNS, l.Peer.NetNSName
		}
	}
	// The MTUs around it: the peer's (or the device's, when the peer is
	// the small one), the bridge's other ports'.
	type other struct {
		name string
		mtu  int
	}
	var others []other
	if small == l.Name {
		if l.Peer != nil && l.Peer.MTU > o.mtu {
			others = append(others, other{"its peer " + l.Peer.Name, l.Peer.MTU})
		}
	} else if l.MTU > o.mtu {
		others = append(others, other{"its peer " + l.Name, l.MTU})
	}
	var bridge *evidence.Link
	if l.Master != nil {
		bridge = findLink(links, l.NetNS, l.Master.Name)
	}
	if bridge != nil {
		for _, p := range bridge.Ports {
			if p.Name != small && p.MTU > o.mtu {
				others = append(others, other{"the bridge's port " + p.Name, p.MTU})
			}
		}
	}
	big := int(o.frame) - l2Header
	for _, o := range others {
		big = max(big, o.mtu)
	}
	// This namespace's devices that send frames that large.
	var senders []evidence.Interface
	for _, i := range w.Last.Interfaces {
		if i.Name != "lo" && i.MTU > o.mtu && i.MTU >= int(o.frame)-l2Header && (l.NetNS != 0 || i.Name != small) {
			senders = append(senders, i)
		}
	}
	where := ""
	if smallNS != 0 {
		where = " in network namespace " + cmp.Or(smallNSName, fmt.Sprint(smallNS))
	}
	f := report.Finding{ID: MTUMismatch, Severity: report.Critical, Status: report.Active, Subject: small,
		About: report.About{Interface: small, DropReason: o.rows[0].Reason}}
	f.Title = fmt.Sprintf("MTU mismatch: %s%s (MTU %d) drops frames of up to %d bytes", small, where, o.mtu, o.frame)
	if len(others) > 0 {
		var ns []string
		for _, x := range others {
			ns = append(ns, fmt.Sprintf("%s %d", x.name, x.mtu))
		}
		f.Title += " from a layer-2 segment whose other devices carry more (" + strings.Join(ns, ", ") + ")"
	} else if len(senders) > 0 {
		f.Title += fmt.Sprintf(" sent by %s (MTU %d)", senders[0].Name, senders[0].MTU)
	}
	f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%d frames of this service's flows dropped in %s, each larger than the %d bytes the device takes: the kernel checks a frame against the next device's MTU where it forwards it at layer 2 (%s), and no router is there to send ICMP \"fragmentation needed\"",
		o.n, round(w), o.mtu, o.rows[0].Location), Source: dropSource, Window: true})
	for i, d := range o.rows {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, report.Item{Text: flowText(d, w), Source: dropSource, Window: true})
	}
	f.Evidence = append(f.Evidence, report.Item{Text: "the device: " + describeLink(l, bridge), Source: "interfaces"})
	for _, s := range senders {
		t := fmt.Sprintf("this namespace's %s: MTU %d", s.Name, s.MTU)
		if s.Link != nil {
			t = "this namespace's " + describeLink(s.Link, nil)
			if s.Link.GSOMaxSegs == 1 {
				t += "; gso_max_segs 1: the stack segments everything itself and sends frames of its MTU"
			}
		}
		f.Evidence = append(f.Evidence, report.Item{Text: t, Source: "interfaces"})
	}
	var segs, full uint64
	for _, r := range retransIn(w) {
		segs, full = segs+r.Segments, full+r.Full
	}
	if segs > 0 {
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("this side retransmitted %d segments in %s, %d of them full-size: what is larger than %d bytes never arrives, what is smaller passes", segs, round(w), full, o.mtu), Source: dropSource, Window: true})
	}
	prefix := nsPrefix(in, smallNS, smallNSName)
	if len(others) > 0 {
		f.Actions = append(f.Actions, report.Command(fmt.Sprintf("%sip link set dev %s mtu %d", prefix, small, big),
			fmt.Sprintf("the odd one out: every device of one layer-2 segment needs the same MTU, and the others carry %d", big)))
	}
	for _, s := range senders {
		f.Actions = append(f.Actions, report.Command(fmt.Sprintf("%sip link set dev %s mtu %d", netns.Parse(in.Bundle.Host.NetNS).ExecPrefix(), s.Name, o.mtu),
			fmt.Sprintf("or, where %d is the segment's real limit (a switch port, a provider's link), this side's MTU down to it", o.mtu)))
	}
	f.Actions = append(f.Actions, notes("path MTU discovery cannot help at layer 2: nothing sends ICMP there; tcp_mtu_probing only finds a smaller size after each connection stalls")...)
	return f
}

// findLink is the device named name in namespace ns (0: the observed
// one) among links.
func findLink(links []evidence.Link, ns uint64, name string) *evidence.Link {
	for i := range links {
		if links[i].NetNS == ns && links[i].Name == name {
			return &links[i]
		}
	}
	return nil
}

// describeLink says what a device is: "ndpc-1 in network namespace br
// (veth, MTU 1500, a port of bridge ndbr-1 whose ports are ndps-1 9000,
// ndpc-1 1500; its peer ndc-1 in network namespace cli, MTU 9000)".
func describeLink(l *evidence.Link, bridge *evidence.Link) string {
	var b strings.Builder
	b.WriteString(l.Name)
	if l.NetNS != 0 {
		b.WriteString(" in network namespace " + cmp.Or(l.NetNSName, fmt.Sprint(l.NetNS)))
	}
	fmt.Fprintf(&b, " (%s, MTU %d", cmp.Or(l.Kind, "device"), l.MTU)
	if l.Master != nil {
		b.WriteString(", a port of " + l.Master.Name)
		if bridge != nil && len(bridge.Ports) > 0 {
			var ps []string
			for _, p := range bridge.Ports {
				ps = append(ps, fmt.Sprintf("%s %d", p.Name, p.MTU))
			}
			fmt.Fprintf(&b, " (%s, MTU %d) whose ports are %s", cmp.Or(bridge.Kind, "bridge"), bridge.MTU, strings.Join(ps, ", "))
		}
	}
	if p := l.Peer; p != nil {
		b.WriteString("; its peer " + p.Name)
		if p.NetNS != 0 {
			b.WriteString(" in network namespace " + cmp.Or(p.NetNSName, fmt.Sprint(p.NetNS)))
		}
		if p.Master != "" {
			b.WriteString(", a port of " + p.Master)
		}
		fmt.Fprintf(&b, ", MTU %d", p.MTU)
	}
	if l.Lower != nil {
		fmt.Fprintf(&b, "; over %s (MTU %d)", l.Lower.Name, l.Lower.MTU)
	}
	if l.Overhead > 0 {
		fmt.Fprintf(&b, "; its headers add %d bytes", l.Overhead)
	}
	b.WriteString(")")
	return b.String()
}

// nsPrefix is how a command enters namespace ns: the observed one's own
// prefix for 0, `ip netns exec NAME` for a named one, else nothing (the
// command's words say which namespace).
func nsPrefix(in *Input, ns uint64, name string) string {
	switch {
	case ns == 0:
		return netns.Parse(in.Bundle.Host.NetNS).ExecPrefix()
	case name != "":
		return netns.Parse(name).ExecPrefix()
	}
	return ""
}
