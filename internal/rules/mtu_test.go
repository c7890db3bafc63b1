package rules

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// The bridge of issue 36: the server (eth0 here, 9000) and its client
// (ndc, 9000, in namespace cli) on one bridge (ndbr, in namespace br)
// whose port to the client, ndpc, is left at 1500.
var (
	bridgePort = evidence.Link{Name: "ndpc", Index: 7, NetNS: nsBridge, NetNSName: "br", MTU: 1500, Kind: "veth",
		Master: &evidence.LinkRef{Name: "ndbr", Index: 5}, Peer: &evidence.LinkRef{Name: "ndc", Index: 3, NetNS: nsClient, NetNSName: "cli", MTU: 9000}}
	theBridge = evidence.Link{Name: "ndbr", Index: 5, NetNS: nsBridge, NetNSName: "br", MTU: 1500, Kind: "bridge",
		Ports: []evidence.LinkRef{{Name: "ndps", Index: 6, MTU: 9000}, {Name: "ndpc", Index: 7, MTU: 1500}}}
	serverVeth = evidence.Link{Name: "eth0", Index: 2, MTU: 9000, Kind: "veth", GSOMaxSegs: 1,
		Peer: &evidence.LinkRef{Name: "ndps", Index: 6, NetNS: nsBridge, NetNSName: "br", MTU: 9000, Master: "ndbr"}}
)

// jumbo is the server on jumbo frames, its veth described.
func jumbo(s *evidence.Snapshot) {
	for i := range s.Interfaces {
		if s.Interfaces[i].Name == "eth0" {
			s.Interfaces[i].MTU = 9000
			l := serverVeth
			s.Interfaces[i].Link = &l
		}
	}
}

// bridgeDrop is the bridge dropping n of the server's 9000-byte frames
// to the client where it leaves for the 1500 port.
func bridgeDrop(n uint64, location string) evidence.FlowDrop {
	return evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: location, Iface: "ndpc", Ifindex: 7, NetNS: nsBridge, NetNSName: "br",
		Flow: tcp("10.0.0.2:8080", "10.0.1.1:41000"), Packets: n, Bytes: n * 9000, MaxLen: 9000}
}

// serverRetrans is the server's full-size retransmissions to the client.
var serverRetrans = evidence.Retrans{Local: "10.0.0.2:8080", Remote: "10.0.1.1:41000", Segments: 12, Full: 12, MaxLen: 8948, MSS: 8948, Open: true, PMTU: 9000, SndMSS: 8948}

func bridged(d evidence.FlowDrop, own bool) *evidence.Bundle {
	last := all(monitored(nil), jumbo, ledgerElsewhere(d), dropLinks(bridgePort, theBridge))
	if own {
		last = all(last, retrans(serverRetrans))
	}
	return bundle(all(monitored(nil), jumbo), last)
}

var _ = addTable("checkMTU", checkMTU, mtuCases)

func mtuCases() []ruleCase {
	gso := bridgeDrop(40, "__dev_queue_xmit")
	gso.Reason, gso.MaxLen = "QDISC_DROP", 65000
	veth := evidence.FlowDrop{Reason: "NOT_SPECIFIED", Location: "veth_xmit", Iface: "eth0", Ifindex: 2, Flow: tcp("10.0.0.2:8080", "10.0.1.1:41000"), Packets: 30, MaxLen: 9000}
	small := serverVeth
	small.Peer = &evidence.LinkRef{Name: "ndps", Index: 6, NetNS: nsBridge, NetNSName: "br", MTU: 1500}
	hereSmall := func(s *evidence.Snapshot) {
		for i := range s.Interfaces {
			if s.Interfaces[i].Name == "eth0" {
				s.Interfaces[i].MTU = 9000
				l := small
				s.Interfaces[i].Link = &l
			}
		}
	}
	return []ruleCase{
		{name: "healthy", bundle: bundle(nil, nil)},
		{name: "healthy, monitored", bundle: bundle(monitored(nil), monitored(nil))},
		{
			name:   "a bridge port smaller than its members drops the service's frames",
			bundle: bridged(bridgeDrop(40, "br_nf_dev_queue_xmit"), true),
			want: []want{{ID: MTUMismatch, Status: report.Active, Severity: report.Critical, Subject: "ndpc",
				Evidence: []string{"40 frames of this service's flows dropped in 1s, each larger than the 1500 bytes the device takes",
					"NOT_SPECIFIED: 40 tcp packets of 10.0.0.2:8080 → 10.0.1.1:41000 dropped in 1s by br_nf_dev_queue_xmit on ndpc in network namespace br, up to 9000 bytes",
					"the device: ndpc in network namespace br (veth, MTU 1500, a port of ndbr (bridge, MTU 1500) whose ports are ndps 9000, ndpc 1500; its peer ndc in network namespace cli, MTU 9000)",
					"this namespace's eth0 (veth, MTU 9000; its peer ndps in network namespace br, a port of ndbr, MTU 9000); gso_max_segs 1",
					"this side retransmitted 12 segments in 1s, 12 of them full-size"}}},
		},
		{name: "another service's frames: not this one's", bundle: bridged(bridgeDrop(40, "br_nf_dev_queue_xmit"), false)},
		{name: "a handful", bundle: bridged(bridgeDrop(5, "br_dev_queue_push_xmit"), true)},
		{name: "a GSO packet a qdisc dropped is no frame too big", bundle: bridged(gso, true)},
		{
			name:   "a veth whose peer is smaller, here",
			bundle: bundle(all(monitored(nil), hereSmall), all(monitored(nil), hereSmall, ledger(veth))),
			want: []want{{ID: MTUMismatch, Status: report.Active, Severity: report.Critical, Subject: "ndps",
				Evidence: []string{"30 frames", "larger than the 1500 bytes"}}},
		},
	}
}

func TestCheckMTU(t *testing.T) {
	runCases(t, "checkMTU", checkMTU, mtuCases())
}

// TestMTUFix: both MTUs named, the odd one out raised in its namespace,
// or this side's lowered to it; and the other rules leave the drops to
// it: no path MTU black hole, no packet-drops.
func TestMTUFix(t *testing.T) {
	b := inNetNS(bridged(bridgeDrop(40, "br_nf_dev_queue_xmit"), true), "srv")
	f := checkMTU(on(b))[0]
	if !strings.Contains(f.Title, "ndpc in network namespace br (MTU 1500) drops frames of up to 9000 bytes from a layer-2 segment whose other devices carry more (its peer ndc 9000, the bridge's port ndps 9000)") ||
		f.About.Interface != "ndpc" {
		t.Errorf("title %q about %+v", f.Title, f.About)
	}
	for _, want := range []string{"ip netns exec br ip link set dev ndpc mtu 9000  (the odd one out", "ip netns exec srv ip link set dev eth0 mtu 1500  (or, where 1500 is the segment's real limit", "path MTU discovery cannot help at layer 2"} {
		if !hasFix(f, want) {
			t.Errorf("fix lacks %q: %q", want, fixOf(f))
		}
	}
	b.Snapshots[1].Counters["Tcp.RetransSegs"] += 12
	fs := CheckHost(b, nil, nil)
	for _, x := range fs {
		if x.ID == PathMTUBlackhole || x.ID == PacketDrops {
			t.Errorf("the mismatch's drops named again: %+v", x)
		}
	}
}
