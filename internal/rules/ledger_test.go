package rules

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// The ledger's rows in the tests: the lab's namespaces by inode.
const (
	nsRouter = 4026532999
	nsBridge = 4026532001
	nsClient = 4026532002
	nsOther  = 4026532003
)

// ledger gives a monitored snapshot its namespace's drops by flow.
func ledger(rows ...evidence.FlowDrop) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Drops.Ledger = rows }
}

// ledgerElsewhere gives a monitored snapshot the drops by flow of the
// host's other namespaces.
func ledgerElsewhere(rows ...evidence.FlowDrop) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Drops.LedgerElsewhere = rows }
}

// dropLinks describes the devices of the drops elsewhere.
func dropLinks(ls ...evidence.Link) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Drops.Links = ls }
}

// tcp is a TCP flow.
func tcp(src, dst string) evidence.Flow { return evidence.Flow{Proto: "tcp", Src: src, Dst: dst} }

// TestOversize: a frame is too big for a device only where the kernel
// checks it at layer 2, and only above the device's MTU or its peer's
// (with room for a link header); a GSO packet a qdisc dropped is no
// frame.
func TestOversize(t *testing.T) {
	port := evidence.Link{Name: "ndpc", Index: 7, NetNS: nsBridge, MTU: 1500, Kind: "veth", Peer: &evidence.LinkRef{Name: "ndc", MTU: 9000}}
	veth := evidence.Link{Name: "eth0", Index: 2, MTU: 9000, Kind: "veth", Peer: &evidence.LinkRef{Name: "br0p", MTU: 1500}}
	links := []evidence.Link{port, veth}
	for _, tc := range []struct {
		name string
		d    evidence.FlowDrop
		mtu  int
		big  bool
	}{
		{"a jumbo frame at a 1500 bridge port", evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: "br_nf_dev_queue_xmit", Iface: "ndpc", Ifindex: 7, NetNS: nsBridge, MaxLen: 9000}, 1500, true},
		{"a full 1500 frame with its header", evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: "br_dev_queue_push_xmit", Iface: "ndpc", Ifindex: 7, NetNS: nsBridge, MaxLen: 1514}, 0, false},
		{"a GSO packet a qdisc dropped", evidence.FlowDrop{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Iface: "ndpc", Ifindex: 7, NetNS: nsBridge, MaxLen: 65000}, 0, false},
		{"a veth whose peer is smaller", evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: "veth_xmit", Iface: "eth0", Ifindex: 2, MaxLen: 9000}, 1500, true},
		{"a device not described", evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: "veth_xmit", Iface: "eth9", Ifindex: 9, MaxLen: 9000}, 0, false},
		{"the same index in another namespace", evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: "veth_xmit", Iface: "x", Ifindex: 2, NetNS: nsOther, MaxLen: 9000}, 0, false},
	} {
		mtu, _, big := oversize(tc.d, links)
		if mtu != tc.mtu || big != tc.big {
			t.Errorf("%s: %d %v, want %d %v", tc.name, mtu, big, tc.mtu, tc.big)
		}
	}
}

// TestLedgerRise: rows count what rose in the window, by their identity
// (the namespace, the place and the flow).
func TestLedgerRise(t *testing.T) {
	row := evidence.FlowDrop{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Iface: "r-s", NetNS: nsRouter, Flow: tcp("10.0.0.2:80", "10.0.1.1:41000"), Packets: 50, Bytes: 5000}
	later := row
	later.Packets, later.Bytes = 250, 25000
	gone := row
	gone.Flow = tcp("10.0.0.2:80", "10.0.1.1:41001")
	b := bundle(all(monitored(nil), ledgerElsewhere(row, gone)), all(monitored(nil), ledgerElsewhere(later, gone)))
	w, _ := b.Window()
	_, elsewhere, ok := ledgerIn(w)
	if !ok || len(elsewhere) != 1 || elsewhere[0].Packets != 200 || elsewhere[0].Bytes != 20000 {
		t.Fatalf("%v %+v", ok, elsewhere)
	}
}
