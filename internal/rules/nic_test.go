package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// iface returns a change that applies f to the named interface.
func iface(name string, f func(*evidence.Interface)) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		for i := range s.Interfaces {
			if s.Interfaces[i].Name == name {
				f(&s.Interfaces[i])
			}
		}
	}
}

var _ = addTable("checkNIC", checkNIC, nicCases)

// TestNICAdviceByDevice: ring, IRQ and RSS advice only for a physical
// NIC whose driver is known; a veth's drops are read against its peer,
// with both MTUs when the peer's is smaller; a tap's against its reader.
func TestNICAdviceByDevice(t *testing.T) {
	for _, tc := range []struct {
		name       string
		link       *evidence.Link
		kind       string
		evidence   string
		fix, nofix string
	}{
		{"a NIC with its driver", &evidence.Link{Name: "eth0", MTU: 1500, Kind: "device", Driver: "ixgbe"}, "device", "", "ethtool -G eth0 rx 4096", ""},
		{"a bundle that does not describe it", nil, "", "", "ethtool -G eth0 rx 4096", ""},
		{"a device without a driver to ask", &evidence.Link{Name: "eth0", MTU: 1500, Kind: "device"}, "device", "", "ethtool -S eth0", "ethtool -G"},
		{"a veth whose peer is smaller", &evidence.Link{Name: "eth0", MTU: 9000, Kind: "veth", Peer: &evidence.LinkRef{Name: "p0", MTU: 1500, NetNS: nsBridge, NetNSName: "br"}}, "veth",
			"eth0's peer p0 takes frames of 1500 bytes at most, eth0 sends up to 9000", "ip link set dev eth0 mtu 1500", "ethtool -G"},
		{"a tap", &evidence.Link{Name: "eth0", MTU: 1500, Kind: "tap"}, "tuntap", "eth0 is eth0 (tap, MTU 1500)", "the program that reads eth0", "ethtool -G"},
		{"a vxlan", &evidence.Link{Name: "eth0", MTU: 1500, Kind: "vxlan", Overhead: 50, Lower: &evidence.LinkRef{Name: "ens3", MTU: 1500}}, "vxlan", "over ens3 (MTU 1500); its headers add 50 bytes", "adding 50 bytes of headers", "ethtool -G"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := bundle(nil, iface("eth0", func(i *evidence.Interface) { i.TxDrop += 40; i.Link = tc.link; i.LinkKind = tc.kind }))
			fs := checkNIC(on(b))
			if len(fs) != 1 {
				t.Fatalf("%+v", fs)
			}
			f := fs[0]
			if tc.evidence != "" && !hasEvidence(f, tc.evidence) {
				t.Errorf("evidence lacks %q: %q", tc.evidence, evidenceTexts(f))
			}
			if !hasFix(f, tc.fix) || tc.nofix != "" && hasFix(f, tc.nofix) {
				t.Errorf("fix %q: want %q, not %q", fixOf(f), tc.fix, tc.nofix)
			}
		})
	}
}

func nicCases() []ruleCase {
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "traffic without drops",
			bundle: bundle(nil, iface("eth0", func(i *evidence.Interface) { i.RxBytes += 1e8; i.TxBytes += 1e8; i.RxPackets += 1e5 })),
		},
		{
			name:   "qdisc drops on the way out (fault 11)",
			bundle: bundle(nil, iface("eth0", func(i *evidence.Interface) { i.TxDrop += 343 })),
			want: []want{{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "eth0",
				Evidence: []string{"eth0 tx_dropped +343 in 1s"}}},
		},
		{
			name: "every counter the rule reads",
			bundle: bundle(nil, iface("eth0", func(i *evidence.Interface) {
				i.RxDrop += 1
				i.RxErrs += 2
				i.RxFifo += 3
				i.TxDrop += 4
				i.TxErrs += 5
				i.TxCarrier += 6
			})),
			want: []want{{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "eth0",
				Evidence: []string{"eth0 rx_dropped +1 in 1s", "eth0 rx_errors +2", "eth0 rx_fifo +3", "eth0 tx_dropped +4", "eth0 tx_errors +5", "eth0 tx_carrier +6"}}},
		},
		{
			name: "two interfaces",
			bundle: bundle(nil, all(iface("lo", func(i *evidence.Interface) { i.RxDrop += 9 }),
				iface("eth0", func(i *evidence.Interface) { i.RxErrs += 1 }))),
			want: []want{
				{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "lo", Evidence: []string{"lo rx_dropped +9"}},
				{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "eth0", Evidence: []string{"eth0 rx_errors +1"}},
			},
		},
		{
			name:   "per-CPU backlog drops",
			bundle: bundle(nil, func(s *evidence.Snapshot) { s.Softnet[1].Dropped += 12; s.Softnet[0].TimeSqueeze += 50 }),
			want: []want{{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "softnet",
				Evidence: []string{"softnet_stat dropped +12 in 1s", "net.core.netdev_max_backlog = 1000"}}},
		},
		{
			name:   "time_squeeze alone is no drop",
			bundle: bundle(nil, func(s *evidence.Snapshot) { s.Softnet[0].TimeSqueeze += 5000 }),
		},
		{
			name: "interface and backlog drops",
			bundle: bundle(nil, all(iface("eth0", func(i *evidence.Interface) { i.RxFifo += 7 }),
				func(s *evidence.Snapshot) { s.Softnet[0].Dropped += 3 })),
			want: []want{
				{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "eth0", Evidence: []string{"eth0 rx_fifo +7"}},
				{ID: "nic-drops", Status: report.Active, Severity: report.Warning, Subject: "softnet", Evidence: []string{"softnet_stat dropped +3"}},
			},
		},
		{
			name:   "counters went backwards (device recreated)",
			bundle: bundle(iface("eth0", func(i *evidence.Interface) { i.RxDrop += 1e6; i.TxErrs += 10 }), func(s *evidence.Snapshot) { s.Softnet[0].Dropped = 0 }),
		},
		{
			name:   "softnet went backwards",
			bundle: bundle(func(s *evidence.Snapshot) { s.Softnet[0].Dropped = 100 }, nil),
		},
		{
			name: "interface only in the last snapshot",
			bundle: bundle(nil, func(s *evidence.Snapshot) {
				s.Interfaces = append(s.Interfaces, evidence.Interface{Name: "veth1", RxDrop: 500})
			}),
		},
		{
			name: "a CPU more in the last snapshot",
			bundle: bundle(nil, func(s *evidence.Snapshot) {
				s.Softnet = append(s.Softnet, evidence.Softnet{CPU: 2, Dropped: 40})
			}),
		},
		{
			name:   "no interfaces or softnet",
			bundle: bundle(func(s *evidence.Snapshot) { s.Interfaces, s.Softnet = nil, nil }, func(s *evidence.Snapshot) { s.Interfaces, s.Softnet = nil, nil }),
		},
		{
			name:   "one snapshot",
			bundle: single(iface("eth0", func(i *evidence.Interface) { i.RxDrop += 1000 })),
		},
	}
}

func TestCheckNIC(t *testing.T) {
	runCases(t, "checkNIC", checkNIC, nicCases())
}

// TestNICBacklogFix checks that the backlog is doubled, to at least 2000,
// without a namespace prefix: netdev_max_backlog is global.
func TestNICBacklogFix(t *testing.T) {
	tests := []struct {
		backlog string
		want    string
	}{
		{"1000", "2000"},
		{"300", "2000"},
		{"5000", "10000"},
	}
	for _, tt := range tests {
		b := inNetNS(bundle(nil, all(setSysctl("net.core.netdev_max_backlog", tt.backlog),
			func(s *evidence.Snapshot) { s.Softnet[0].Dropped += 1 })), "feas-srv")
		got := checkNIC(on(b))
		if len(got) != 1 {
			t.Fatalf("netdev_max_backlog %s: checkNIC(on()) = %v, want one finding", tt.backlog, keys(got))
		}
		want := sysctlFix(bundle(nil, nil), "net.core.netdev_max_backlog", tt.want).Lines
		if diff := cmp.Diff(want, fixOf(got[0])[:2]); diff != "" {
			t.Errorf("netdev_max_backlog %s: checkNIC(on()) fix mismatch (-want +got):\n%s", tt.backlog, diff)
		}
	}
}
