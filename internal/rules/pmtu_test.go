package rules

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// retrans gives a monitored snapshot its flows' retransmissions.
func retrans(fs ...evidence.Retrans) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Drops.Retrans = fs }
}

func flow(segs, full uint64) evidence.Retrans {
	return evidence.Retrans{Local: "10.0.0.2:80", Remote: "10.0.1.1:41000", Segments: segs, Full: full, MaxLen: 1448, MSS: 1448, Open: true, PMTU: 1500, SndMSS: 1448}
}

var _ = addTable("checkPMTU", checkPMTU, pmtuCases)

func pmtuCases() []ruleCase {
	return []ruleCase{
		{name: "healthy", bundle: bundle(nil, nil)},
		{name: "healthy, monitored", bundle: bundle(monitored(nil), monitored(nil))},
		{
			name:   "only full-size segments retransmitted, no ICMP",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored(nil), retrans(flow(42, 42)))),
			want: []want{{ID: PathMTUBlackhole, Status: report.Active, Severity: report.Critical, Subject: "10.0.1.1",
				Evidence: []string{"40 of 40 segments retransmitted", "10.0.0.2:80 → 10.0.1.1:41000: 40 retransmissions", "TCP believes the path's MTU is 1500", "ICMP \"destination unreachable\" received in the window: 0", "eth0 1500"}}},
		},
		{
			name:   "the router's ICMP arrives: path MTU discovery works",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2)), raise(0, "IcmpMsg.InType3")), all(monitored(nil), retrans(flow(42, 42)), raise(40, "IcmpMsg.InType3"))),
		},
		{
			name:   "fast retransmits: later full-size segments arrived, so the path carries them",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored(nil), retrans(flow(42, 42)), raise(30, "TcpExt.TCPFastRetrans"))),
		},
		{
			name:   "the segments died in this namespace's qdisc",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored([]evidence.Drop{{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Proto: "tcp", Iface: "eth0", Packets: 40}}), retrans(flow(42, 42)))),
		},
		{
			name:   "losses of any size are not an MTU",
			bundle: bundle(all(monitored(nil), retrans(flow(0, 0))), all(monitored(nil), retrans(flow(40, 10)))),
		},
		{
			name:   "a handful is any path's loss",
			bundle: bundle(all(monitored(nil), retrans(flow(0, 0))), all(monitored(nil), retrans(flow(4, 4)))),
		},
		{
			name: "this namespace drops what is larger than its next hop",
			bundle: bundle(monitored(nil), monitored([]evidence.Drop{{Reason: "PKT_TOO_BIG", Location: "ip_forward", Proto: "tcp", Iface: "eth0", Packets: 100,
				Ports: []evidence.DropPort{{Port: 80, Packets: 100}}}})),
			want: []want{{ID: PathMTUBlackhole, Status: report.Active, Severity: report.Warning, Subject: "PKT_TOO_BIG",
				Evidence: []string{"PKT_TOO_BIG: 100 tcp packets", "by ip_forward on eth0", "IcmpMsg.OutType3"}}},
		},
		{name: "no monitor, no sizes", bundle: bundle(nil, raise(40, "Tcp.RetransSegs"))},
		{
			name: "the receivers had them: their sockets dropped them as old data (issue 36's slow readers)",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored(nil), retrans(flow(42, 42)),
				ledgerElsewhere(evidence.FlowDrop{Reason: "TCP_OLD_DATA", Location: "tcp_rcv_established", NetNS: nsClient, Flow: tcp("10.0.0.2:80", "10.0.1.1:41000"), SocketPort: 41000, Packets: 40}))),
		},
		{
			name:   "the receivers reported them as duplicates (D-SACK): they arrived, wherever the receivers are",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored(nil), retrans(flow(42, 42)), raise(40, "TcpExt.TCPDSACKRecv"))),
		},
		{
			name: "a router of this host dropped them elsewhere for another reason",
			bundle: bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored(nil), retrans(flow(42, 42)),
				ledgerElsewhere(evidence.FlowDrop{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Iface: "r-c", NetNS: nsRouter, Flow: tcp("10.0.0.2:80", "10.0.1.1:41000"), Packets: 40}))),
		},
	}
}

func TestCheckPMTU(t *testing.T) {
	runCases(t, "checkPMTU", checkPMTU, pmtuCases())
}

// TestPMTUFix: the three ways out, the router named when the drops were
// seen in its namespace.
func TestPMTUFix(t *testing.T) {
	away := evidence.FlowDrop{Reason: "PKT_TOO_BIG", Location: "ip_forward", Iface: "r-c", NetNS: nsRouter, NetNSName: "router", Packets: 60,
		Flow: tcp("10.0.0.2:80", "10.0.1.1:41000"), MaxLen: 1500}
	b := bundle(all(monitored(nil), retrans(flow(2, 2))), all(monitored(nil), retrans(flow(42, 42)), ledgerElsewhere(away)))
	run := &evidence.Run{Port: "80", Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}}}
	fs := checkPMTU(&Input{Bundle: b, Run: run, Side: report.Server})
	if len(fs) != 1 {
		t.Fatalf("%+v", fs)
	}
	f := fs[0]
	for _, want := range []string{"sysctl -w net.ipv4.tcp_mtu_probing=1", "on the router (network namespace router)", "ip netns exec router nft add rule inet filter forward tcp flags syn tcp option maxseg size set rt mtu", "TCPMSS --clamp-mss-to-pmtu", "type 3 code 4"} {
		if !hasFix(f, want) {
			t.Errorf("fix lacks %q: %q", want, f.Fix)
		}
	}
	if !hasEvidence(f, "by ip_forward on r-c in network namespace router") {
		t.Errorf("evidence: %q", evidenceTexts(f))
	}
}
