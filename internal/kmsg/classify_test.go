package kmsg

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		text string
		want Class
	}{
		// Conntrack, as in seeds 000 and 002 and on 6.18 (kernel-evidence.md §3).
		{"nf_conntrack: table full, dropping packet", Class{Name: "conntrack-table-full"}},
		{"nf_conntrack: table full, dropping packet.", Class{Name: "conntrack-table-full"}},
		{"ip_conntrack: table full, dropping packet.", Class{Name: "conntrack-table-full"}},
		{
			"nf_conntrack: nf_conntrack: table full in netns 4026532246, dropping packet",
			Class{Name: "conntrack-table-full", NetNS: 4026532246},
		},
		{"nf_conntrack: expectation table full", Class{Name: "conntrack-expect-full"}},

		// SYN flooding (kernel-evidence.md §1, §2; seed 004).
		{
			"TCP: request_sock_TCP: Possible SYN flooding on port 10.77.0.2:80. Sending cookies.",
			Class{Name: "syn-flooding", Addr: "10.77.0.2", Port: 80},
		},
		{
			"TCP: request_sock_TCP: Possible SYN flooding on port 10.77.0.2:80. Dropping request.",
			Class{Name: "syn-flooding", Addr: "10.77.0.2", Port: 80},
		},
		{
			"TCP: request_sock_TCPv6: Possible SYN flooding on port [::]:80. Sending cookies.",
			Class{Name: "syn-flooding", Addr: "::", Port: 80},
		},
		{
			"TCP: request_sock_TCPv6: Possible SYN flooding on port [2001:db8::1]:8443. Dropping request.",
			Class{Name: "syn-flooding", Addr: "2001:db8::1", Port: 8443},
		},
		{"possible SYN flooding on port 80. Sending cookies.", Class{Name: "syn-flooding", Port: 80}},
		{
			"TCP: TCP: Possible SYN flooding on port 8080. Sending cookies.  Check SNMP counters.",
			Class{Name: "syn-flooding", Port: 8080},
		},

		// Socket resources.
		{"TCP: time wait bucket table overflow", Class{Name: "timewait-overflow"}},
		{"TCP: out of memory -- consider tuning tcp_mem", Class{Name: "out-of-socket-memory"}},
		{"Out of socket memory", Class{Name: "out-of-socket-memory"}},
		{"TCP: too many orphaned sockets", Class{Name: "too-many-orphans"}},
		{"TCP: too many of orphaned sockets", Class{Name: "too-many-orphans"}},
		{"VFS: file-max limit 1000 reached", Class{Name: "file-max"}},
		{"neighbour: arp_cache: neighbor table overflow!", Class{Name: "neighbour-table-overflow", Family: "ipv4"}},
		{"neighbour: ndisc_cache: neighbor table overflow!", Class{Name: "neighbour-table-overflow", Family: "ipv6"}},
		{"Neighbour table overflow.", Class{Name: "neighbour-table-overflow"}},
		{
			"ip_local_port_range: prefer different parity for start/end values.",
			Class{Name: "port-range-parity"},
		},

		// Rate limiting.
		{"net_ratelimit: 240 callbacks suppressed", Class{Name: "ratelimit-suppressed", Suppressed: 240}},
		{"__ratelimit: 12 callbacks suppressed", Class{Name: "ratelimit-suppressed", Suppressed: 12}},
		{"nf_conntrack: 5 callbacks suppressed", Class{Name: "ratelimit-suppressed", Suppressed: 5}},

		// Devices.
		{
			"NETDEV WATCHDOG: eth0 (virtio_net): transmit queue 0 timed out",
			Class{Name: "tx-timeout"},
		},
		{
			"virtio_net virtio0 eth0: NETDEV WATCHDOG: CPU: 1: transmit queue 0 timed out 5368 ms",
			Class{Name: "tx-timeout"},
		},
		{"e1000e 0000:00:19.0 eth0: NIC Link is Down", Class{Name: "link-down"}},
		{"r8169 0000:02:00.0 enp2s0: Link is Down", Class{Name: "link-down"}},
		{"mlx5_core 0000:3b:00.0 ens1f0np0: Link down", Class{Name: "link-down"}},
		{
			"kworker/u4:2: page allocation failure: order:4, mode:0x40cc0(GFP_KERNEL|__GFP_COMP), nodemask=(null)",
			Class{Name: "page-alloc-failure"},
		},

		// Unclassified, including look-alikes.
		{"", Class{}},
		{"Linux version 6.18.44 (builder@sandboxing) #1 SMP PREEMPT_DYNAMIC", Class{}},
		{"Out of memory: Killed process 1234 (nginx) total-vm:123kB", Class{}},
		{"e1000e 0000:00:19.0 eth0: NIC Link is Up 1000 Mbps Full Duplex", Class{}},
		{"r8169 0000:02:00.0 enp2s0: Link is Up - 1Gbps/Full - flow control off", Class{}},
		{"nf_conntrack: default automatic helper assignment has been turned off", Class{}},
		{"printk: dmesg (1234): 10 output lines suppressed due to ratelimiting", Class{}},
	}
	for _, tt := range tests {
		got := Classify(tt.text)
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Classify(%q) mismatch (-want +got):\n%s", tt.text, diff)
		}
	}
}
