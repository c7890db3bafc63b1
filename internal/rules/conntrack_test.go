package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// ctTableFull is the 6.18 kernel message of kernel-evidence fault 3.
const ctTableFull = "nf_conntrack: nf_conntrack: table full in netns 4026532246, dropping packet"

// conntrack returns a change that sets the conntrack table.
func conntrack(count, max uint64, stats map[string]uint64) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		s.Conntrack = &evidence.Conntrack{Count: count, Max: max, Buckets: 1024, Stats: stats}
	}
}

var _ = addTable("checkConntrack", checkConntrack, conntrackCases)

func conntrackCases() []ruleCase {
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name: "table full and dropping (fault 3, seed 000 stage 1)",
			bundle: bundle(conntrack(200, 200, map[string]uint64{"drop": 0}),
				all(conntrack(200, 200, map[string]uint64{"drop": 175}), kmsgs("conntrack-table-full", ctTableFull, ctTableFull))),
			want: []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical,
				Evidence: []string{
					"nf_conntrack drop +175 in 1s",
					"kernel: " + ctTableFull,
					"2 'table full' kernel messages in the window",
					"nf_conntrack_count peaked at 200 of nf_conntrack_max 200 (100%), 1024 hash buckets",
				}}},
		},
		{
			name: "early_drop and insert_failed rising",
			bundle: bundle(conntrack(190, 200, map[string]uint64{"early_drop": 3, "insert_failed": 1}),
				conntrack(150, 200, map[string]uint64{"early_drop": 40, "insert_failed": 9})),
			want: []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"nf_conntrack early_drop +37", "nf_conntrack insert_failed +8", "peaked at 190 of nf_conntrack_max 200 (95%)"}}},
		},
		{
			name:   "kernel message only (seed 002)",
			bundle: bundle(nil, kmsgs("conntrack-table-full", "nf_conntrack: table full, dropping packet")),
			want: []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"kernel: nf_conntrack: table full, dropping packet", "peaked at 10 of nf_conntrack_max 262144 (0%)"}}},
		},
		{
			name:   "nearly full: latent",
			bundle: bundle(nil, conntrack(220000, 262144, nil)),
			want: []want{{ID: "conntrack-table-full", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"nf_conntrack_count peaked at 220000 of nf_conntrack_max 262144 (84%)"}}},
		},
		{
			name:   "peak in the first snapshot counts",
			bundle: bundle(conntrack(250000, 262144, nil), conntrack(100, 262144, nil)),
			want: []want{{ID: "conntrack-table-full", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"peaked at 250000 of nf_conntrack_max 262144 (95%)"}}},
		},
		{
			name:   "exactly 80% full",
			bundle: bundle(nil, conntrack(80, 100, nil)),
			want:   []want{{ID: "conntrack-table-full", Status: report.Latent, Severity: report.Warning, Evidence: []string{"80 of nf_conntrack_max 100 (80%)"}}},
		},
		{
			name:   "79% full",
			bundle: bundle(nil, conntrack(79, 100, nil)),
		},
		{
			name:   "drop counter went backwards",
			bundle: bundle(conntrack(10, 262144, map[string]uint64{"drop": 500}), conntrack(10, 262144, map[string]uint64{"drop": 0})),
		},
		{
			name:   "no stats in the first snapshot",
			bundle: bundle(conntrack(10, 262144, nil), conntrack(10, 262144, map[string]uint64{"drop": 7})),
			want: []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"nf_conntrack drop +7"}}},
		},
		{
			name:   "no conntrack in the first snapshot",
			bundle: bundle(func(s *evidence.Snapshot) { s.Conntrack = nil }, conntrack(10, 262144, map[string]uint64{"drop": 7})),
		},
		{
			name: "no conntrack at all",
			bundle: bundle(func(s *evidence.Snapshot) { s.Conntrack = nil },
				all(func(s *evidence.Snapshot) { s.Conntrack = nil }, kmsgs("conntrack-table-full", ctTableFull))),
		},
		{
			name:   "max unknown",
			bundle: bundle(nil, conntrack(200, 0, map[string]uint64{"drop": 175})),
		},
		{
			name: "table full in this namespace",
			bundle: withInode(bundle(nil, messages(evidence.KernelMsg{Class: "conntrack-table-full", NetNS: 4026532246, Text: ctTableFull})),
				4026532246),
			want: []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical, Evidence: []string{"kernel: " + ctTableFull}}},
		},
		{
			name:   "old message without a namespace, ours known",
			bundle: withInode(bundle(nil, kmsgs("conntrack-table-full", "nf_conntrack: table full, dropping packet")), 4026531840),
			want: []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"kernel: nf_conntrack: table full, dropping packet"}}},
		},
		{
			name: "table full in another namespace",
			bundle: withInode(bundle(nil, messages(evidence.KernelMsg{Class: "conntrack-table-full", NetNS: 4026532246, Text: ctTableFull})),
				4026531840),
		},
		{
			name:   "table full in a namespace, ours unknown",
			bundle: bundle(nil, messages(evidence.KernelMsg{Class: "conntrack-table-full", NetNS: 4026532246, Text: ctTableFull})),
			want:   []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical, Evidence: []string{"kernel: " + ctTableFull}}},
		},
		{
			name:   "one snapshot, healthy",
			bundle: single(nil),
		},
		{
			name:   "one snapshot, nearly full",
			bundle: single(conntrack(199, 200, nil)),
			want:   []want{{ID: "conntrack-table-full", Status: report.Latent, Severity: report.Warning, Evidence: []string{"199 of nf_conntrack_max 200"}}},
		},
		{
			name:   "one snapshot with a table full message",
			bundle: single(kmsgs("conntrack-table-full", ctTableFull)),
			want:   []want{{ID: "conntrack-table-full", Status: report.Active, Severity: report.Critical, Evidence: []string{"kernel: " + ctTableFull}}},
		},
	}
}

func TestCheckConntrack(t *testing.T) {
	runCases(t, "checkConntrack", checkConntrack, conntrackCases())
}

// TestConntrackEvidence compares the whole evidence of the fault-3
// finding: drops, one kernel line, the message count and the level.
func TestConntrackEvidence(t *testing.T) {
	b := bundle(conntrack(200, 200, map[string]uint64{"drop": 0, "early_drop": 0}),
		all(conntrack(200, 200, map[string]uint64{"drop": 175, "early_drop": 0}),
			kmsgs("conntrack-table-full", ctTableFull, ctTableFull, ctTableFull),
			kmsgs("ratelimit-suppressed", "net_ratelimit: 240 callbacks suppressed")))
	got := checkConntrack(on(b))
	if len(got) != 1 {
		t.Fatalf("checkConntrack(on()) = %v, want one finding", keys(got))
	}
	want := []report.Item{
		{Text: "nf_conntrack drop +175 in 1s", Source: "conntrack.drop", Window: true},
		{Text: "kernel: " + ctTableFull, Source: "kmsg", Window: true},
		{Text: "3 'table full' kernel messages in the window", Source: "kmsg", Window: true},
		{Text: "nf_conntrack_count peaked at 200 of nf_conntrack_max 200 (100%), 1024 hash buckets", Source: "conntrack", Window: true},
	}
	if diff := cmp.Diff(want, got[0].Evidence); diff != "" {
		t.Errorf("checkConntrack(on()) evidence mismatch (-want +got):\n%s", diff)
	}
}

// TestConntrackLatentLevelIsStatic checks that a level alone is not
// presented as something observed changing.
func TestConntrackLatentLevelIsStatic(t *testing.T) {
	got := checkConntrack(on(bundle(nil, conntrack(220000, 262144, nil))))
	if len(got) != 1 {
		t.Fatalf("checkConntrack(on()) = %v, want one finding", keys(got))
	}
	for _, it := range got[0].Evidence {
		if it.Window {
			t.Errorf("latent finding has window evidence %q", it.Text)
		}
	}
}

// TestConntrackFix checks the size proposed for nf_conntrack_max, as
// tune plan computes it (sizing.Conntrack): the connections opened and
// accepted × the TIME_WAIT timeout with a quarter's margin, or twice the
// most entries seen (the maximum, when the table dropped), a power of
// two, never below the hash's buckets nor 65536.
func TestConntrackFix(t *testing.T) {
	tests := []struct {
		name       string
		count, max uint64
		buckets    uint64
		opens      uint64 // per second, half opened, half accepted
		netns      string
		want       []string
	}{
		{name: "tiny table", count: 190, max: 200, buckets: 1024, want: []string{
			"sysctl -w net.netfilter.nf_conntrack_max=65536  (global: set it in the initial namespace)",
			"echo 65536 > /sys/module/nf_conntrack/parameters/hashsize  (grow the hash with the table, or chains get long)",
			"persist: echo 'net.netfilter.nf_conntrack_max = 65536' > /etc/sysctl.d/90-netdoctor-net.netfilter.nf_conntrack_max.conf",
			"0 new connections/s × 120 s in TIME_WAIT × 1.25 = 0 entries, twice the 200 seen (the table was full)",
		}},
		{name: "the kernel's own hash size", count: 200, max: 200, buckets: 262144, want: []string{
			"sysctl -w net.netfilter.nf_conntrack_max=262144  (global: set it in the initial namespace)",
		}},
		{name: "connection rate", count: 200, max: 200, buckets: 1024, opens: 2000, want: []string{
			"sysctl -w net.netfilter.nf_conntrack_max=524288  (global: set it in the initial namespace)",
			"2000 new connections/s × 120 s in TIME_WAIT × 1.25 = 300000 entries",
		}},
		{name: "peak needs more", count: 100000, max: 120000, buckets: 1024, want: []string{
			"sysctl -w net.netfilter.nf_conntrack_max=262144  (global: set it in the initial namespace)",
		}},
		{name: "above the current limit", count: 230000, max: 262144, buckets: 262144, want: []string{
			"sysctl -w net.netfilter.nf_conntrack_max=524288  (global: set it in the initial namespace)",
		}},
		{name: "drops from a large, nearly empty table", count: 10, max: 1048576, buckets: 262144, want: []string{
			"sysctl -w net.netfilter.nf_conntrack_max=2097152  (global: set it in the initial namespace)",
		}},
		{name: "namespace note", count: 200, max: 200, buckets: 1024, netns: "feas-srv", want: []string{
			"note: nf_conntrack_max is shared by every namespace and read-only inside feas-srv",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ct := func(drops uint64) func(*evidence.Snapshot) {
				return func(s *evidence.Snapshot) {
					s.Conntrack = &evidence.Conntrack{Count: tt.count, Max: tt.max, Buckets: tt.buckets, Stats: map[string]uint64{"drop": drops}}
				}
			}
			b := inNetNS(bundle(ct(0), all(ct(3), raise(tt.opens/2, "Tcp.ActiveOpens", "Tcp.PassiveOpens"))), tt.netns)
			got := checkConntrack(on(b))
			if len(got) != 1 {
				t.Fatalf("checkConntrack(on()) = %v, want one finding", keys(got))
			}
			for _, w := range tt.want {
				if !hasFix(got[0], w) {
					t.Errorf("checkConntrack(on()) fix lacks %q; got %q", w, fixOf(got[0]))
				}
			}
		})
	}
}
