package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
)

// t0 is when every test bundle starts.
var t0 = time.Date(2026, 11, 21, 23, 40, 0, 0, time.UTC)

// healthy returns a snapshot of a quiet, well-configured host at time at:
// kernel defaults, a conntrack table nearly empty, listeners with the
// usual backlogs and nothing dropping. Each call builds fresh maps and
// slices, so tests may change them freely.
func healthy(at time.Time) evidence.Snapshot {
	return evidence.Snapshot{
		Time: at,
		Status: []evidence.Status{
			{Collector: "counters", State: evidence.StateOK},
			{Collector: "sockdiag", State: evidence.StateOK},
		},
		Counters: map[string]uint64{
			"Tcp.ActiveOpens":             5000,
			"Tcp.PassiveOpens":            80000,
			"Tcp.CurrEstab":               12,
			"Tcp.InSegs":                  9000000,
			"Tcp.OutSegs":                 9500000,
			"Tcp.RetransSegs":             1200,
			"Tcp.OutRsts":                 300,
			"TcpExt.TCPSynRetrans":        40,
			"TcpExt.ListenOverflows":      0,
			"TcpExt.ListenDrops":          0,
			"TcpExt.TCPReqQFullDrop":      0,
			"TcpExt.TCPReqQFullDoCookies": 0,
			"TcpExt.TCPTimeWaitOverflow":  0,
			"TcpExt.TCPTimeouts":          300,
			"TcpExt.TCPLossProbes":        500,
			"TcpExt.TCPFastRetrans":       200,
			"TcpExt.TCPDSACKRecv":         50,
			"TcpExt.TCPRcvQDrop":          0,
			"TcpExt.TCPBacklogDrop":       0,
			"TcpExt.PruneCalled":          0,
			"TcpExt.RcvPruned":            0,
			"TcpExt.TCPMemoryPressures":   0,
			"TcpExt.TCPAbortOnMemory":     0,
			"Udp.RcvbufErrors":            0,
			"Udp.SndbufErrors":            0,
			"Udp6.RcvbufErrors":           0,
			"TcpExt.TW":                   4000,
			"TcpExt.DelayedACKs":          700,
			"TcpExt.TCPLossProbeRecovery": 100,
			"Ip.InReceives":               9100000,
			"Ip6.InReceives":              1000,
		},
		Sockstat: map[string]int64{
			"sockets.used": 220,
			"TCP.inuse":    20,
			"TCP.orphan":   0,
			"TCP.tw":       30,
			"TCP.alloc":    25,
			"TCP.mem":      5,
		},
		Sysctls: map[string]string{
			"net.core.somaxconn":               "4096",
			"net.core.netdev_max_backlog":      "1000",
			"net.core.rmem_max":                "212992",
			"net.core.wmem_max":                "212992",
			"net.ipv4.ip_local_port_range":     "32768 60999",
			"net.ipv4.tcp_max_tw_buckets":      "131072",
			"net.ipv4.tcp_max_syn_backlog":     "1024",
			"net.ipv4.tcp_syncookies":          "1",
			"net.ipv4.tcp_tw_reuse":            "2",
			"net.ipv4.tcp_timestamps":          "1",
			"net.ipv4.tcp_abort_on_overflow":   "0",
			"net.ipv4.tcp_keepalive_time":      "7200",
			"net.ipv4.tcp_moderate_rcvbuf":     "1",
			"net.ipv4.tcp_low_latency":         "0",
			"net.ipv4.tcp_mem":                 "190000 253000 380000",
			"net.netfilter.nf_conntrack_max":   "262144",
			"net.netfilter.nf_conntrack_count": "10",
			"fs.file-max":                      "9223372036854775807",
			"fs.file-nr":                       "3200 0 9223372036854775807",
		},
		Softnet: []evidence.Softnet{
			{CPU: 0, Processed: 400000, TimeSqueeze: 3},
			{CPU: 1, Processed: 380000, TimeSqueeze: 1},
		},
		CPU: []evidence.CPU{
			{CPU: -1, User: 20000, System: 8000, Idle: 160000, IOWait: 400, SoftIRQ: 1600},
			{CPU: 0, User: 10000, System: 4000, Idle: 80000, IOWait: 200, SoftIRQ: 800},
			{CPU: 1, User: 10000, System: 4000, Idle: 80000, IOWait: 200, SoftIRQ: 800},
		},
		Interfaces: []evidence.Interface{
			{Name: "lo", OperState: "unknown", MTU: 65536, RxBytes: 1e6, RxPackets: 1e4, TxBytes: 1e6, TxPackets: 1e4},
			{Name: "eth0", OperState: "up", MTU: 1500, SpeedMbps: 10000, Qdisc: "fq_codel",
				RxBytes: 9e9, RxPackets: 9e6, RxDrop: 12, TxBytes: 8e9, TxPackets: 8e6},
		},
		Conntrack: &evidence.Conntrack{Count: 10, Max: 262144, Buckets: 262144,
			Stats: map[string]uint64{"found": 0, "invalid": 3, "insert": 0, "insert_failed": 0, "drop": 0, "early_drop": 0, "search_restart": 7}},
		Sockets: &evidence.Sockets{
			TCP: map[string]int{"ESTABLISHED": 12, "LISTEN": 3, "TIME_WAIT": 30},
			Listeners: []evidence.Listener{
				{Proto: "tcp", Addr: "0.0.0.0:80", Port: 80, RecvQ: 0, SendQ: 511, Inode: 1001, PIDs: []int{100, 101}, Process: "nginx"},
				{Proto: "tcp6", Addr: "[::]:80", Port: 80, RecvQ: 0, SendQ: 511, Inode: 1002, PIDs: []int{100, 101}, Process: "nginx"},
				{Proto: "tcp", Addr: "127.0.0.1:9000", Port: 9000, RecvQ: 0, SendQ: 4096, Inode: 1003, PIDs: []int{200}, Process: "php-fpm8.2"},
				{Proto: "unix", Addr: "/run/php/php-fpm.sock", RecvQ: 0, SendQ: 4096, Inode: 1004, PIDs: []int{200}, Process: "php-fpm8.2"},
			},
			Remotes: []evidence.Remote{
				{Addr: "127.0.0.1:9000", Established: 4, TimeWait: 20, Ephemeral: 24},
				{Addr: "10.0.0.5:6379", Established: 8, Ephemeral: 8},
			},
		},
		Processes: []evidence.Process{
			{PID: 100, Comm: "nginx", Threads: 1, OpenFDs: 40, NofileSoft: 65535, NofileHard: 65535, Role: "listener :80"},
			{PID: 200, Comm: "php-fpm8.2", Threads: 1, OpenFDs: 20, NofileSoft: 65535, NofileHard: 65535, Role: "listener 127.0.0.1:9000"},
		},
		Resolver: &evidence.Resolver{
			ConfPath:    "/etc/resolv.conf",
			Nameservers: []string{"10.0.0.2"},
			Probes: []evidence.DNSProbe{
				{Server: "10.0.0.2", Type: "A", Name: "web1", Duration: 3 * time.Millisecond, Rcode: "NOERROR"},
				{Server: "10.0.0.2", Type: "PTR", Name: "10.0.0.10", Duration: 2 * time.Millisecond, Rcode: "NXDOMAIN"},
			},
		},
	}
}

// bundle returns a bundle of two healthy snapshots one second apart,
// after first and last (either may be nil) have changed them.
func bundle(first, last func(*evidence.Snapshot)) *evidence.Bundle {
	a, z := healthy(t0), healthy(t0.Add(time.Second))
	if first != nil {
		first(&a)
	}
	if last != nil {
		last(&z)
	}
	return &evidence.Bundle{
		Version:   evidence.BundleVersion,
		Host:      evidence.Host{Hostname: "web1", Kernel: "6.18.44", CPUs: 2, UserHZ: 100},
		Start:     t0,
		Snapshots: []evidence.Snapshot{a, z},
	}
}

// single returns a bundle of one healthy snapshot after f (if not nil)
// has changed it.
func single(f func(*evidence.Snapshot)) *evidence.Bundle {
	s := healthy(t0)
	if f != nil {
		f(&s)
	}
	return &evidence.Bundle{
		Version:   evidence.BundleVersion,
		Host:      evidence.Host{Hostname: "web1", Kernel: "6.18.44", CPUs: 2, UserHZ: 100},
		Start:     t0,
		Snapshots: []evidence.Snapshot{s},
	}
}

// inNetNS moves a bundle to the named network namespace.
func inNetNS(b *evidence.Bundle, ns string) *evidence.Bundle {
	b.Host.NetNS = ns
	return b
}

// withInode sets the inode of the namespace a bundle was taken in.
func withInode(b *evidence.Bundle, inode uint64) *evidence.Bundle {
	b.Host.NetNSInode = inode
	return b
}

// raise returns a change that adds by to each named counter.
func raise(by uint64, names ...string) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		for _, n := range names {
			s.Counters[n] += by
		}
	}
}

// all combines changes into one.
func all(fs ...func(*evidence.Snapshot)) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		for _, f := range fs {
			f(s)
		}
	}
}

// setSysctl returns a change that sets a sysctl.
func setSysctl(name, value string) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Sysctls[name] = value }
}

// listeners returns a change that replaces the listening sockets.
func listeners(ls ...evidence.Listener) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Sockets.Listeners = ls }
}

// kmsg returns a change that adds kernel messages of one class.
func kmsgs(class string, texts ...string) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		for _, t := range texts {
			s.Kmsg = append(s.Kmsg, evidence.KernelMsg{Time: s.Time, Priority: 4, Text: t, Class: class, Family: kmsg.Classify(t).Family})
		}
	}
}

// messages returns a change that adds kernel messages as given, with
// the snapshot's time.
func messages(ms ...evidence.KernelMsg) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		for _, m := range ms {
			m.Time = s.Time
			s.Kmsg = append(s.Kmsg, m)
		}
	}
}

// want is what a test expects of one finding: its identity, plus texts
// that must each appear in one of its evidence items.
type want struct {
	ID       report.FindingID
	Status   report.Status
	Severity report.Severity
	Subject  string
	Evidence []string
}

// ruleCase is one row of a rule's table.
type ruleCase struct {
	name   string
	bundle *evidence.Bundle
	want   []want
}

// key is the part of a finding compared as a whole.
type key struct {
	ID       report.FindingID
	Status   report.Status
	Severity report.Severity
	Subject  string
}

func keys(fs []report.Finding) []key {
	var out []key
	for _, f := range fs {
		out = append(out, key{f.ID, f.Status, f.Severity, f.Subject})
	}
	return out
}

func wantKeys(ws []want) []key {
	var out []key
	for _, w := range ws {
		out = append(out, key{w.ID, w.Status, w.Severity, w.Subject})
	}
	return out
}

// hasEvidence reports whether one of f's evidence items contains s.
func hasEvidence(f report.Finding, s string) bool {
	for _, it := range f.Evidence {
		if strings.Contains(it.Text, s) {
			return true
		}
	}
	return false
}

func evidenceTexts(f report.Finding) []string {
	out := make([]string, len(f.Evidence))
	for i, it := range f.Evidence {
		out[i] = it.Text
	}
	return out
}

// hasFix reports whether one of f's fix lines contains s.
func hasFix(f report.Finding, s string) bool {
	for _, l := range fixOf(f) {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}

// runCases runs check over each case and compares the findings with the
// case's wants.
func runCases(t *testing.T, name string, check func(*Input) []report.Finding, cases []ruleCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := check(on(tc.bundle))
			if diff := cmp.Diff(wantKeys(tc.want), keys(got)); diff != "" {
				t.Fatalf("%s() mismatch (-want +got):\n%s", name, diff)
			}
			for i, w := range tc.want {
				for _, s := range w.Evidence {
					if !hasEvidence(got[i], s) {
						t.Errorf("%s() finding %s: no evidence item contains %q; evidence:\n%s",
							name, got[i].ID, s, strings.Join(evidenceTexts(got[i]), "\n"))
					}
				}
				if len(got[i].Evidence) == 0 {
					t.Errorf("%s() finding %s has no evidence", name, got[i].ID)
				}
				if len(fixOf(got[i])) == 0 {
					t.Errorf("%s() finding %s has no fix", name, got[i].ID)
				}
				if got[i].Title == "" {
					t.Errorf("%s() finding %s has no title", name, got[i].ID)
				}
			}
		})
	}
}

// table is one rule's cases, for tests that look across every rule.
type table struct {
	name  string
	check func(*Input) []report.Finding
	cases func() []ruleCase
}

// tables are every rule's cases: each rule's test file adds its own
// (addTable).
var tables []table

// addTable adds a rule's cases to the tests that look across every rule:
//
//	var _ = addTable("checkNeighbour", checkNeighbour, neighbourCases)
func addTable(name string, check func(*Input) []report.Finding, cases func() []ruleCase) bool {
	tables = append(tables, table{name, check, cases})
	return true
}

// on is the input of a rule that reads one namespace's bundle, as check
// and diagnose give it.
func on(b *evidence.Bundle) *Input { return &Input{Bundle: b} }

// fixOf is a finding's fix as a report renders it from its actions.
func fixOf(f report.Finding) []string { return report.FixOf(f) }
