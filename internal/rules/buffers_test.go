package rules

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

const oomMsg = "TCP: out of memory -- consider tuning tcp_mem"

var _ = addTable("checkBuffers", checkBuffers, buffersCases)

func buffersCases() []ruleCase {
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "receive queue drops",
			bundle: bundle(nil, raise(42, "TcpExt.TCPRcvQDrop")),
			want: []want{{ID: "socket-buffer-limit", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"TcpExtTCPRcvQDrop +42 in 1s (42.0/s)"}}},
		},
		{
			name: "every counter the rule reads",
			bundle: bundle(nil, all(raise(1, "TcpExt.TCPRcvQDrop"), raise(2, "TcpExt.TCPBacklogDrop"), raise(3, "TcpExt.PruneCalled"),
				raise(4, "TcpExt.RcvPruned"), raise(5, "TcpExt.TCPMemoryPressures"), raise(6, "TcpExt.TCPAbortOnMemory"),
				raise(7, "Udp.RcvbufErrors"), raise(8, "Udp.SndbufErrors"), raise(9, "Udp6.RcvbufErrors"))),
			want: []want{{ID: "socket-buffer-limit", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"TcpExtTCPRcvQDrop +1", "TcpExtTCPBacklogDrop +2", "TcpExtPruneCalled +3", "TcpExtRcvPruned +4",
					"TcpExtTCPMemoryPressures +5", "TcpExtTCPAbortOnMemory +6", "UdpRcvbufErrors +7", "UdpSndbufErrors +8", "Udp6RcvbufErrors +9"}}},
		},
		{
			name: "TCP out of memory",
			bundle: bundle(nil, all(raise(12, "TcpExt.TCPAbortOnMemory"), kmsgs("out-of-socket-memory", oomMsg, oomMsg),
				func(s *evidence.Snapshot) { s.Sockstat["TCP.mem"] = 380001 })),
			want: []want{{ID: "socket-buffer-limit", Status: report.Active, Severity: report.Warning,
				Evidence: []string{
					"TcpExtTCPAbortOnMemory +12",
					"kernel: " + oomMsg,
					"TCP memory 380001 pages; tcp_mem (min pressure max) = 190000 253000 380000",
				}}},
		},
		{
			name:   "too many orphans message only",
			bundle: bundle(nil, kmsgs("too-many-orphans", "TCP: too many orphaned sockets")),
			want: []want{{ID: "socket-buffer-limit", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"kernel: TCP: too many orphaned sockets"}}},
		},
		{
			name:   "unrelated kernel message",
			bundle: bundle(nil, kmsgs("link-down", "e1000e: eth0 NIC Link is Down")),
		},
		{
			name:   "memory level alone is no finding",
			bundle: bundle(nil, func(s *evidence.Snapshot) { s.Sockstat["TCP.mem"] = 400000 }),
		},
		{
			name:   "counters went backwards",
			bundle: bundle(raise(1000, "TcpExt.TCPRcvQDrop", "Udp.RcvbufErrors"), nil),
		},
		{
			name:   "no sockstat or sysctls",
			bundle: bundle(nil, all(raise(3, "Udp.RcvbufErrors"), func(s *evidence.Snapshot) { s.Sockstat, s.Sysctls = nil, nil })),
			want:   []want{{ID: "socket-buffer-limit", Status: report.Active, Severity: report.Warning, Evidence: []string{"UdpRcvbufErrors +3"}}},
		},
		{
			name:   "one snapshot",
			bundle: single(kmsgs("out-of-socket-memory", oomMsg)),
		},
		{
			name:   "a UDP receiver's own drops, named with its process and buffer",
			bundle: bundle(sockDropsOf(udpReceiver(100)), all(sockDropsOf(udpReceiver(3700)), raise(3600, "Udp.RcvbufErrors"))),
			want: []want{{ID: SocketBufferLimit, Status: report.Active, Severity: report.Warning, Subject: "0.0.0.0:5000",
				Evidence: []string{"UDP receiver python3 (pid 4242) on 0.0.0.0:5000: 3600 dropped in 1s (3600.0/s)", "its receive buffer takes 4.5 KiB", "held 4.5 KiB when sampled: full", "UdpRcvbufErrors +3600"}}},
		},
		{
			name:   "a socket's drops before the window are not the window's",
			bundle: bundle(sockDropsOf(udpReceiver(3700)), sockDropsOf(udpReceiver(3700))),
		},
		{
			name:   "a socket that began dropping within the window",
			bundle: bundle(nil, sockDropsOf(udpReceiver(50))),
			want: []want{{ID: SocketBufferLimit, Status: report.Active, Severity: report.Warning, Subject: "0.0.0.0:5000",
				Evidence: []string{"50 dropped in 1s"}}},
		},
	}
}

// udpReceiver is a python3 UDP receiver with a 4.5 KiB buffer that has
// dropped n datagrams.
func udpReceiver(n uint64) evidence.SocketDrops {
	return evidence.SocketDrops{Proto: "udp", Local: "0.0.0.0:5000", Inode: 77, Drops: n, RcvBuf: 4608, RmemAlloc: 4608, PIDs: []int{4242}, Process: "python3"}
}

func sockDropsOf(ds ...evidence.SocketDrops) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Sockets.Drops = ds }
}

// TestUDPReceiverFix: the socket's own buffer, sized on what arrives,
// and rmem_max raised to let the kernel grant it.
func TestUDPReceiverFix(t *testing.T) {
	b := inNetNS(bundle(all(sockDropsOf(udpReceiver(100)), raise(0, "Udp.InDatagrams")), all(sockDropsOf(udpReceiver(18100)), raise(18000, "Udp.RcvbufErrors"), raise(2000, "Udp.InDatagrams"))), "srv")
	f := checkBuffers(on(b))[0]
	if f.Title != "UDP receiver python3 (pid 4242) on 0.0.0.0:5000 drops datagrams: its receive buffer (4.5 KiB) is full" {
		t.Errorf("title %q", f.Title)
	}
	// 20000 datagrams/s × 0.2 s × 2 KiB = 8.2 MB → 8 MiB.
	for _, want := range []string{"setsockopt(SO_RCVBUF, 8388608)", "sysctl -w net.core.rmem_max=8388608", "20000 datagrams/s arriving", "SO_REUSEPORT"} {
		if !hasFix(f, want) {
			t.Errorf("fix lacks %q: %q", want, f.Fix)
		}
	}
	if hasFix(f, "ip netns exec srv sysctl -w net.core.rmem_max") {
		t.Errorf("rmem_max is the host's: %q", f.Fix)
	}
}

func TestCheckBuffers(t *testing.T) {
	runCases(t, "checkBuffers", checkBuffers, buffersCases())
}

// TestBuffersRmemFix checks that a larger rmem_max is advised only while
// it is under 4 MiB.
func TestBuffersRmemFix(t *testing.T) {
	tests := []struct {
		rmemMax string
		want    bool
	}{
		{"212992", true},
		{"4194303", true},
		{"4194304", false},
		{"16777216", false},
		{"", false},
	}
	for _, tt := range tests {
		b := bundle(nil, all(raise(7, "Udp.RcvbufErrors"), setSysctl("net.core.rmem_max", tt.rmemMax)))
		got := checkBuffers(on(b))
		if len(got) != 1 {
			t.Fatalf("rmem_max %q: checkBuffers(on()) = %v, want one finding", tt.rmemMax, keys(got))
		}
		if g := hasFix(got[0], sysctlFix(b, "net.core.rmem_max", "16777216").Lines[0]); g != tt.want {
			t.Errorf("rmem_max %q: fix raises rmem_max = %v, want %v; fix %q", tt.rmemMax, g, tt.want, fixOf(got[0]))
		}
	}
}

// TestAgentFlowDrops: a run's own connection to its agent dropped a
// segment (data sent after the run closed it) on the client's side and
// the agent's: netdoctor's, no finding about the service; the same drop
// on a service's connection is one.
func TestAgentFlowDrops(t *testing.T) {
	agentConn := func(local, remote string) evidence.SocketDrops {
		return evidence.SocketDrops{Proto: "tcp", Local: local, Remote: remote, Inode: 91, Drops: 1, RcvBuf: 131072}
	}
	run := &evidence.Run{Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: evidence.Server, Agent: "http://10.99.32.1:9120"}}}}
	for _, c := range []struct {
		name string
		sd   evidence.SocketDrops
		want bool
	}{
		{"the run's end", agentConn("10.99.32.2:40546", "10.99.32.1:9120"), false},
		{"the agent's end", agentConn("10.99.32.1:9120", "10.99.32.2:40546"), false},
		{"a service's connection", agentConn("10.99.32.2:40546", "10.99.32.1:80"), true},
	} {
		in := on(bundle(nil, sockDropsOf(c.sd)))
		in.Run = run
		if got := len(checkBuffers(in)) > 0; got != c.want {
			t.Errorf("%s: finding %v, want %v", c.name, got, c.want)
		}
	}
}
