package rules

import (
	"fmt"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// slowFlows are n connections of a streaming server on 10.0.0.2:8080 to
// receivers on 10.0.1.1, each retransmitting segs full-size segments.
func slowFlows(n int, segs uint64) []evidence.Retrans {
	var out []evidence.Retrans
	for i := range n {
		out = append(out, evidence.Retrans{Local: "10.0.0.2:8080", Remote: fmt.Sprintf("10.0.1.1:%d", 41000+i), Segments: segs, Full: segs, MaxLen: 1448, MSS: 1448, Open: true, PMTU: 1500, SndMSS: 1448})
	}
	return out
}

// receiverDrops are what the receivers' sockets (in namespace cli) did
// with each flow's segments: dropped old data, and window probes.
func receiverDrops(flows []evidence.Retrans, socket bool) []evidence.FlowDrop {
	var out []evidence.FlowDrop
	for _, f := range flows {
		port := 0
		if socket {
			port = portNum(f.Remote)
		}
		out = append(out,
			evidence.FlowDrop{Reason: "TCP_OLD_DATA", Location: "tcp_rcv_established", Iface: "c0", NetNS: nsClient, NetNSName: "cli", Flow: tcp(f.Local, f.Remote), SocketPort: port, Packets: f.Segments, MaxLen: 1500},
			evidence.FlowDrop{Reason: "TCP_OLD_SEQUENCE", Location: "tcp_validate_incoming", Iface: "c0", NetNS: nsClient, NetNSName: "cli", Flow: tcp(f.Local, f.Remote), SocketPort: port, Packets: 3, MaxLen: 52})
	}
	return out
}

// slowReaders is a server's bundle whose flows to slow receivers
// retransmitted, with what the receivers' sockets dropped; unexplained
// more connections whose retransmissions nothing on the host explains.
func slowReaders(socket bool, unexplained int) *evidence.Bundle {
	fs := slowFlows(4, 4)
	away := receiverDrops(fs, socket)
	for i := range unexplained {
		fs = append(fs, evidence.Retrans{Local: "10.0.0.2:8080", Remote: fmt.Sprintf("10.0.2.1:%d", 50000+i), Segments: 20, Full: 20, MaxLen: 1448, MSS: 1448})
	}
	return bundle(all(monitored(nil), raise(0, "TcpExt.TCPWinProbe"), listeners(evidence.Listener{Proto: "tcp", Addr: "10.0.0.2:8080", Port: 8080, SendQ: 128})),
		all(monitored(nil), retrans(fs...), ledgerElsewhere(away...), raise(30, "TcpExt.TCPWinProbe"), raise(16, "TcpExt.TCPDSACKRecv"),
			listeners(evidence.Listener{Proto: "tcp", Addr: "10.0.0.2:8080", Port: 8080, SendQ: 128})))
}

var _ = addTable("checkReceivers", checkReceivers, receiverCases)

func receiverCases() []ruleCase {
	return []ruleCase{
		{name: "healthy", bundle: bundle(nil, nil)},
		{name: "healthy, monitored", bundle: bundle(monitored(nil), monitored(nil))},
		{
			name:   "the receivers' sockets had what the server retransmitted",
			bundle: slowReaders(true, 0),
			want: []want{{ID: ReceiverWindowLimited, Status: report.Active, Severity: report.Warning, Subject: "10.0.1.1",
				Evidence: []string{"16 of the 16 segments retransmitted in 1s (100%), on 4 connection(s), reached their receivers",
					"receiver 10.0.1.1 (network namespace cli): 4 connection(s), 16 segments retransmitted to it (e.g. 10.0.0.2:8080 → 10.0.1.1:41000: 4, 4 full-size), its sockets dropped TCP_OLD_DATA 16, TCP_OLD_SEQUENCE 12",
					"TcpExtTCPWinProbe +30", "TcpExtTCPDSACKRecv +16"}}},
		},
		{name: "drops of the flows with no receiving socket are not the receivers'", bundle: slowReaders(false, 0)},
		{name: "most retransmissions unexplained: not the receivers'", bundle: slowReaders(true, 2)},
	}
}

func TestCheckReceivers(t *testing.T) {
	runCases(t, "checkReceivers", checkReceivers, receiverCases())
}

// TestSlowReceiversNotThePath: the same evidence through the whole
// diagnosis: the receivers are named, the retransmissions are theirs
// (packet-loss says so and is their consequence), and no path MTU black
// hole is claimed, whatever the segments' sizes.
func TestSlowReceiversNotThePath(t *testing.T) {
	b := slowReaders(true, 0)
	b.Snapshots[1].Counters["Tcp.RetransSegs"] += 16
	b.Snapshots[1].Counters["Tcp.OutSegs"] += 1000
	fs := CheckHost(b, nil, nil)
	r, ok := byID(fs, ReceiverWindowLimited)
	if !ok || r.About.Listen != "10.0.0.2:8080" || r.About.DropReason != "TCP_OLD_DATA" || !hasFix(r, "bound what one slow reader holds") {
		t.Fatalf("%+v", fs)
	}
	if _, ok := byID(fs, PathMTUBlackhole); ok {
		t.Errorf("a black hole claimed of what the receivers had: %+v", keys(fs))
	}
	loss, ok := byID(fs, PacketLoss)
	if !ok || loss.CausedBy != ReceiverWindowLimited || !strings.Contains(loss.Title, "data its receivers already had or could not take (their windows closed), not a lossy path") ||
		!hasEvidence(loss, "reached their receivers, whose sockets dropped them (TCP_OLD_DATA 16, TCP_OLD_SEQUENCE 12") || hasFix(loss, "BBR") {
		t.Errorf("%+v: %q", loss, evidenceTexts(loss))
	}
}

// TestSlowReceiversInRun: in a run whose client side reads slowly, its
// own ledger (another namespace of the same kernel) names it from the
// server's side.
func TestSlowReceiversInRun(t *testing.T) {
	fs := slowFlows(4, 4)
	srv := onHost(bundle(monitored(nil), all(monitored(nil), retrans(fs...))), 11)
	var mine []evidence.FlowDrop
	for _, d := range receiverDrops(fs, true) {
		d.NetNS, d.NetNSName = 0, ""
		mine = append(mine, d)
	}
	cli := onHost(bundle(monitored(nil), all(monitored(nil), ledger(mine...))), 12)
	run := &evidence.Run{Port: "8080", LoadStart: t0, LoadEnd: t0.Add(1e9), Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: srv},
		{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: cli}}}
	got := checkReceivers(&Input{Bundle: srv, Run: run, Side: report.Server})
	if len(got) != 1 || !hasEvidence(got[0], "receiver 10.0.1.1 (network namespace ns12)") {
		t.Fatalf("%+v", got)
	}
}
