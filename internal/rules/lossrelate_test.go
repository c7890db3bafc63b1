package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// queueRun is a run whose server's accept queue on 10.0.0.2:80
// overflowed 'dropped' times while its client retransmitted 'retrans'
// data segments of 20000, with the drop monitor's flows on the client
// when flows is set, and the server's ledger holding the queue's drops
// of those to the listener (both namespaces of one host).
func queueRun(dropped, resent uint64, flows ...evidence.Retrans) *evidence.Run {
	return listenerRun("10.0.0.2:80", dropped, resent, flows...)
}

// listenerRun is queueRun with the server's listener at addr: the run's
// port stays 80, as behind a router that DNATs it.
func listenerRun(addr string, dropped, resent uint64, flows ...evidence.Retrans) *evidence.Run {
	srvFirst, srvLast := raise(0), all(raise(dropped, "TcpExt.ListenOverflows", "TcpExt.ListenDrops"), listeners(
		evidence.Listener{Proto: "tcp", Addr: addr, Port: portNum(addr), RecvQ: 11, SendQ: 10, Inode: 9, PIDs: []int{100}, Process: "python3"}))
	first, last := raise(0), all(raise(resent, "Tcp.RetransSegs"), raise(20000, "Tcp.OutSegs"))
	if len(flows) > 0 {
		first = monitored(nil)
		last = all(last, monitored(nil), retrans(flows...))
		var rows []evidence.FlowDrop
		for _, f := range flows {
			o := f.Client()
			if f.Orig == nil && o.Dst != addr {
				continue // not the listener's
			}
			rows = append(rows, evidence.FlowDrop{Reason: "TCP_LISTEN_OVERFLOW", Location: "tcp_v4_rcv", Iface: "eth0", Flow: tcp(o.Src, addr),
				Orig: f.Orig, Via: f.Via, ViaNetNS: f.ViaNetNS, ViaNetNSName: f.ViaNetNSName, SocketPort: portNum(addr), Packets: 3})
		}
		srvFirst, srvLast = all(srvFirst, monitored(nil)), all(srvLast, monitored(nil), ledger(rows...))
	}
	srv := onHost(bundle(srvFirst, srvLast), 11)
	cli := onHost(bundle(first, last), 12)
	return &evidence.Run{Load: &load.Result{Connections: 200, Requests: 5000, Status: map[string]uint64{"2xx": 5000}, Errors: load.Errors{Timeout: 40},
		Latency: load.Latency{P50: time.Millisecond, P99: 1200 * time.Millisecond, Max: 3 * time.Second}},
		LoadStart: t0, LoadEnd: t0.Add(time.Second), Port: "80",
		Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: srv},
			{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: cli}}}
}

// onHost puts a bundle in namespace inode of one running kernel.
func onHost(b *evidence.Bundle, inode uint64) *evidence.Bundle {
	b.Host.BootID, b.Host.NetNSInode, b.Host.NetNS = "boot-1", inode, fmt.Sprintf("ns%d", inode)
	return b
}

func byID(fs []report.Finding, id report.FindingID) (report.Finding, bool) {
	for _, f := range fs {
		if f.ID == id {
			return f, true
		}
	}
	return report.Finding{}, false
}

// TestLossOfAFullQueue: a client's retransmissions that a full accept
// queue on a clean link explains are its consequence, never a packet
// loss of their own; a loss the queue cannot explain stays one.
func TestLossOfAFullQueue(t *testing.T) {
	toServer := evidence.Retrans{Local: "10.0.0.1:41000", Remote: "10.0.0.2:80", Segments: 900, Full: 10, MaxLen: 1448, MSS: 1448}
	elsewhere := evidence.Retrans{Local: "10.0.0.1:41002", Remote: "10.0.0.9:443", Segments: 900, Full: 900, MaxLen: 1448, MSS: 1448}
	for _, tc := range []struct {
		name       string
		run        *evidence.Run
		consequent bool
		evidence   string
	}{
		{"counters: 2 retransmissions a dropped connection", queueRun(1000, 2000), true, "1000 connections in the same window (TcpExtListenDrops)"},
		{"counters: far more than the queue dropped", queueRun(100, 2000), false, ""},
		{"the monitor: the flows are those the queue dropped", queueRun(100, 2000, toServer), true, "900 of the 900 segments retransmitted in the window (100%) were on connections to the listener whose handshakes or requests the full queue of 10.0.0.2:80 dropped (TCP_LISTEN_OVERFLOW; 1 of them matched one by one)"},
		{"the monitor: the flows go elsewhere", queueRun(1000, 2000, toServer, elsewhere), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs, _ := Diagnose(tc.run)
			loss, ok := byID(fs, PacketLoss)
			if !ok {
				t.Fatalf("no packet-loss: %+v", keys(fs))
			}
			if got := loss.CausedBy == AcceptQueueOverflow; got != tc.consequent {
				t.Fatalf("caused by %q, want the queue: %v; %q", loss.CausedBy, tc.consequent, evidenceTexts(loss))
			}
			if !tc.consequent {
				if strings.Contains(loss.Title, "not a lossy path") {
					t.Errorf("title %q", loss.Title)
				}
				return
			}
			if loss.CauseSubject != "10.0.0.2:80" || !strings.Contains(loss.Title, "what the full queue of 10.0.0.2:80 dropped, not a lossy path") || !hasEvidence(loss, tc.evidence) {
				t.Errorf("%q %q: %q", loss.CauseSubject, loss.Title, evidenceTexts(loss))
			}
			if !hasFix(loss, "fix the queue (accept-queue-overflow)") || hasFix(loss, "BBR") {
				t.Errorf("fix %q", loss.Fix)
			}
			// Listed right under its cause.
			for i, f := range fs {
				if f.ID == AcceptQueueOverflow && (i+1 >= len(fs) || fs[i+1].ID != PacketLoss) {
					t.Errorf("order %v", keys(fs))
				}
			}
		})
	}
}

// TestCleanIsExact: a watched counter that rose without a finding is
// said to have risen, not listed clean; a rule with nothing to read is
// not listed at all.
func TestCleanIsExact(t *testing.T) {
	r := queueRun(0, 0)
	r.Sides[1].Bundle = bundle(nil, raise(593, "TcpExt.TCPSynRetrans", "Tcp.RetransSegs"))
	cl, rose := clean(nil, r)
	for _, c := range cl {
		if c == "retransmissions" {
			t.Errorf("retransmissions listed clean though SYN retransmits rose: %q", cl)
		}
		if c == "the path MTU" || c == "firewall rules and the kernel's drop reasons" {
			t.Errorf("%q listed clean without the evidence it reads", c)
		}
	}
	if len(rose) != 1 || rose[0] != "retransmissions (Tcp.RetransSegs +593 on the client side, TcpExt.TCPSynRetrans +593 on the client side)" {
		t.Errorf("rose %q", rose)
	}
	r.Sides[1].Bundle = bundle(monitored(nil), monitored(nil))
	if cl, _ := clean(nil, r); !strings.Contains(strings.Join(cl, ","), "the path MTU") {
		t.Errorf("with the monitor, the path MTU was looked at: %q", cl)
	}
}

// TestLossOfAQdisc: retransmissions whose segments the drop monitor saw
// die in this namespace's qdisc say so themselves (the loss rule reads
// the drops), and are packet-drops' consequence, in check as in a run.
func TestLossOfAQdisc(t *testing.T) {
	qd := evidence.Drop{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Proto: "tcp", Iface: "eth0", Packets: 900,
		Ports: []evidence.DropPort{{Port: 80, Socket: true, Packets: 900}}}
	b := bundle(monitored(nil), all(monitored([]evidence.Drop{qd}), raise(1000, "Tcp.RetransSegs"), raise(20000, "Tcp.OutSegs")))
	fs := CheckHost(b, nil, nil)
	loss, ok := byID(fs, PacketLoss)
	if !ok || loss.CausedBy != PacketDrops || loss.CauseSubject != "QDISC_DROP" || !strings.Contains(loss.Title, "dropped in this namespace (QDISC_DROP on eth0), not on the path") ||
		loss.Dropped == nil || loss.Dropped.Reason != "QDISC_DROP" || loss.Dropped.Packets != 900 || !hasFix(loss, "fix what drops them (the kernel's drop reason QDISC_DROP)") {
		t.Fatalf("%+v", fs)
	}
	// Fewer drops than half the retransmissions: the loss is also
	// elsewhere, and stands on its own.
	qd.Packets = 100
	b = bundle(monitored(nil), all(monitored([]evidence.Drop{qd}), raise(1000, "Tcp.RetransSegs"), raise(20000, "Tcp.OutSegs")))
	if loss, _ := byID(CheckHost(b, nil, nil), PacketLoss); loss.CausedBy != "" {
		t.Errorf("caused by %q", loss.CausedBy)
	}
}

// TestLossOfAQueueBehindNAT: issue 36. The client connects to a virtual
// IP that a router DNATs to the server's 10.0.0.2:8080, whose queue
// overflows: the server drops packets addressed to itself, the client
// retransmits to the VIP, and the ledger (the router's conntrack) says
// they are the same connections. The retransmissions are the queue's,
// not a loss of their own, whatever port each end sees.
func TestLossOfAQueueBehindNAT(t *testing.T) {
	orig := tcp("10.0.1.1:41000", "10.9.0.80:80")
	viaRouter := evidence.Retrans{Local: "10.0.1.1:41000", Remote: "10.9.0.80:80", Segments: 900, MaxLen: 29, MSS: 1448,
		Orig: &orig, Via: evidence.ViaConntrack, ViaNetNS: nsRouter, ViaNetNSName: "router"}
	// Another connection to the VIP, whose drop the ledger's bounded
	// lists left out: the same listener's.
	orig2 := tcp("10.0.1.1:41001", "10.9.0.80:80")
	unlisted := evidence.Retrans{Local: "10.0.1.1:41001", Remote: "10.9.0.80:80", Segments: 100, MaxLen: 29, MSS: 1448}
	r := listenerRun("10.0.0.2:8080", 100, 2000, viaRouter)
	cli := r.Sides[1].Bundle
	cli.Snapshots[1].Drops.Retrans = append(cli.Snapshots[1].Drops.Retrans, unlisted)
	_ = orig2
	fs, _ := Diagnose(r)
	loss, ok := byID(fs, PacketLoss)
	if !ok {
		t.Fatalf("no packet-loss: %+v", keys(fs))
	}
	if loss.CausedBy != AcceptQueueOverflow || loss.CauseSubject != "10.0.0.2:8080" || !strings.Contains(loss.Title, "what the full queue of 10.0.0.2:8080 dropped, not a lossy path") ||
		!hasEvidence(loss, "1000 of the 1000 segments") || !hasEvidence(loss, "followed through NAT: the client opened 10.0.1.1:41000 → 10.9.0.80:80 (conntrack of router)") {
		t.Errorf("caused by %q %q: %q %q", loss.CausedBy, loss.CauseSubject, loss.Title, evidenceTexts(loss))
	}
	if loss.Dropped == nil || loss.Dropped.Side != report.Server || loss.Dropped.Listen != "10.0.0.2:8080" {
		t.Errorf("dropped %+v", loss.Dropped)
	}
}
