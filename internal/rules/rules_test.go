package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// seed000 is seed 000 with its first, third and fourth faults at once: a
// conntrack table of 200 that drops, listeners capped at a backlog of 10
// by somaxconn, and a 51-port local range.
func seed000() *evidence.Bundle {
	php := phpTen
	nginx := nginxFull
	nginx.RecvQ = 3
	faults := all(
		setSysctl("net.core.somaxconn", "10"),
		seed000Range,
		setSysctl("net.ipv4.tcp_tw_reuse", "0"),
		listeners(nginx, php),
		conntrack(200, 200, map[string]uint64{"drop": 0}),
	)
	return bundle(faults, all(faults,
		listeners(nginxFull, php),
		conntrack(200, 200, map[string]uint64{"drop": 175}),
		kmsgs("conntrack-table-full", ctTableFull),
		raise(3104, "TcpExt.ListenOverflows", "TcpExt.ListenDrops"),
		raise(544, "TcpExt.TCPReqQFullDoCookies"),
		func(s *evidence.Snapshot) { s.Sockstat["TCP.tw"] = 1178 },
	))
}

// checkOrder fails unless active findings come before latent ones and,
// within each, more severe before less.
func checkOrder(t *testing.T, fs []report.Finding) {
	t.Helper()
	for i := 1; i < len(fs); i++ {
		a, b := fs[i-1], fs[i]
		if a.Status == report.Latent && b.Status == report.Active {
			t.Errorf("latent %s sorts before active %s", a.ID, b.ID)
		}
		if a.Status == b.Status && report.MoreSevere(b.Severity, a.Severity) {
			t.Errorf("%s %s sorts before %s %s", a.Severity, a.ID, b.Severity, b.ID)
		}
	}
}

func TestRunSeed000(t *testing.T) {
	got := Check(seed000())
	want := []key{
		{"accept-queue-overflow", report.Active, report.Critical, "10.77.0.2:80"},
		{"conntrack-table-full", report.Active, report.Critical, ""},
		{"syn-queue-overflow", report.Active, report.Warning, ""},
		{"ephemeral-port-exhaustion", report.Latent, report.Warning, ""},
		{"risky-sysctl", report.Latent, report.Warning, "net.core.somaxconn"},
	}
	if diff := cmp.Diff(want, keys(got)); diff != "" {
		t.Errorf("Run() mismatch (-want +got):\n%s", diff)
	}
	for _, id := range []report.FindingID{ConntrackTableFull, AcceptQueueOverflow, EphemeralPortExhaustion} {
		if !slices.ContainsFunc(got, func(f report.Finding) bool { return f.ID == id }) {
			t.Errorf("Run() lacks %s", id)
		}
	}
	checkOrder(t, got)
}

// check is the diagnosis of a bundle by the rules given.
func check(b *evidence.Bundle, rules []Rule) []report.Finding {
	fs, _ := diagnose(&diagnosis{bundle: b, rules: rules})
	return fs
}

// TestRunOrderIndependent checks that the order of the rules does not
// change the report.
func TestRunOrderIndependent(t *testing.T) {
	want := Check(seed000())
	rev := slices.Clone(Registry)
	slices.Reverse(rev)
	got := check(seed000(), rev)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Run() with the rules reversed mismatch (-want +got):\n%s", diff)
	}
}

// TestRunSortsEveryCase checks the order of Run over the bundle of every
// case of every rule.
func TestRunSortsEveryCase(t *testing.T) {
	for _, tb := range tables {
		for _, tc := range tb.cases() {
			checkOrder(t, Check(tc.bundle))
		}
	}
}

func TestRunSortKeys(t *testing.T) {
	in := []report.Finding{
		{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "b"},
		{ID: "fd-limit", Status: report.Latent, Severity: report.Info},
		{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "a"},
		{ID: "dns-slow", Status: report.Active, Severity: report.Warning},
		{ID: "packet-loss", Status: report.Active, Severity: report.Critical},
		{ID: "conntrack-table-full", Status: report.Latent, Severity: report.Warning},
		{ID: "cpu-saturated", Status: report.Active, Severity: report.Critical},
	}
	rule := Rule{Name: "fixed", Check: func(*Input) []report.Finding { return slices.Clone(in) }}
	got := check(bundle(nil, nil), []Rule{rule})
	want := []key{
		{"cpu-saturated", report.Active, report.Critical, ""},
		{"packet-loss", report.Active, report.Critical, ""},
		{"dns-slow", report.Active, report.Warning, ""},
		{"conntrack-table-full", report.Latent, report.Warning, ""},
		{"risky-sysctl", report.Latent, report.Warning, "a"},
		{"risky-sysctl", report.Latent, report.Warning, "b"},
		{"fd-limit", report.Latent, report.Info, ""},
	}
	if diff := cmp.Diff(want, keys(got)); diff != "" {
		t.Errorf("Run() order mismatch (-want +got):\n%s", diff)
	}
}

// busyButHealthy is a web server under steady load with nothing wrong:
// traffic and CPU time in the window, queues below their limits.
func busyButHealthy(s *evidence.Snapshot) {
	all(
		raise(25000, "Tcp.OutSegs", "Tcp.InSegs"),
		raise(30, "Tcp.RetransSegs"),
		raise(4, "TcpExt.TCPSynRetrans"),
		raise(40, "Tcp.ActiveOpens"),
		raise(600, "Tcp.PassiveOpens"),
		raise(12, "TcpExt.TCPLossProbes"),
		raise(5, "TcpExt.TCPTimeouts"),
		ticks(evidence.CPU{User: 25, System: 10, SoftIRQ: 5, Idle: 60}, evidence.CPU{User: 20, System: 8, SoftIRQ: 2, Idle: 69, IOWait: 1}),
		iface("eth0", func(i *evidence.Interface) {
			i.RxBytes += 3e7
			i.TxBytes += 9e7
			i.RxPackets += 3e4
			i.TxPackets += 6e4
		}),
		iface("lo", func(i *evidence.Interface) { i.RxBytes += 1e6; i.TxBytes += 1e6 }),
		func(s *evidence.Snapshot) {
			s.Softnet[0].Processed += 20000
			s.Softnet[0].TimeSqueeze += 2
			s.Softnet[1].Processed += 15000
			s.Conntrack.Count = 1200
			s.Conntrack.Stats["found"] += 50
			s.Conntrack.Stats["insert"] += 640
			s.Sockstat["TCP.tw"] = 800
			s.Sockstat["TCP.inuse"] = 180
			s.Sockets.TCP = map[string]int{"ESTABLISHED": 170, "LISTEN": 3, "TIME_WAIT": 800, "SYN_RECV": 2}
			s.Sockets.Listeners[0].RecvQ = 3
			s.Sockets.Remotes = []evidence.Remote{
				{Addr: "127.0.0.1:9000", Established: 10, TimeWait: 300, Ephemeral: 310},
				{Addr: "10.0.0.5:6379", Established: 64, Ephemeral: 64},
			}
			s.Processes[0].OpenFDs = 400
			s.Processes[1].OpenFDs = 90
			s.Sysctls["fs.file-nr"] = "12000 0 9223372036854775807"
		},
	)(s)
}

func TestHealthyHostQuiet(t *testing.T) {
	tests := []struct {
		name string
		b    *evidence.Bundle
	}{
		{"idle", bundle(nil, ticks(cpuIdle, cpuIdle))},
		{"busy", bundle(nil, busyButHealthy)},
		{"busy in a namespace", inNetNS(bundle(nil, busyButHealthy), "feas-srv")},
		{"one snapshot", single(nil)},
		{"five seconds", bundle(nil, all(busyButHealthy, busyButHealthy, busyButHealthy, busyButHealthy, busyButHealthy,
			func(s *evidence.Snapshot) { s.Time = t0.Add(5 * time.Second) }))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, f := range Check(tt.b) {
				if f.Severity == report.Critical || f.Severity == report.Warning {
					t.Errorf("Run() on a healthy host: %s %s %s (%s): %s", f.Status, f.Severity, f.ID, f.Subject, f.Title)
				}
			}
		})
	}
}

// TestActiveFindingsHaveWindowEvidence checks, over every case of every
// rule, that an active finding rests on at least one thing observed
// during the window.
func TestActiveFindingsHaveWindowEvidence(t *testing.T) {
	active := 0
	for _, tb := range tables {
		for _, tc := range tb.cases() {
			for _, f := range tb.check(on(tc.bundle)) {
				if f.Status != report.Active {
					continue
				}
				active++
				if !slices.ContainsFunc(f.Evidence, func(it report.Item) bool { return it.Window }) {
					t.Errorf("%s %q: active %s (%s) has no evidence with Window = true: %+v", tb.name, tc.name, f.ID, f.Subject, f.Evidence)
				}
			}
		}
	}
	if active < 50 {
		t.Errorf("only %d active findings across all cases; the tables lost their firing cases", active)
	}
}

// TestEveryRuleHasFiringAndQuietCases keeps the tables honest.
func TestEveryRuleHasFiringAndQuietCases(t *testing.T) {
	for _, tb := range tables {
		var firing, quiet int
		for _, tc := range tb.cases() {
			if len(tc.want) > 0 {
				firing++
			} else {
				quiet++
			}
		}
		if firing == 0 || quiet == 0 {
			t.Errorf("%s: %d firing and %d quiet cases, want at least one of each", tb.name, firing, quiet)
		}
	}
}

// TestRunDegenerateBundles runs every rule over bundles with missing
// parts; none may panic, and none of them shows a problem.
func TestRunDegenerateBundles(t *testing.T) {
	bare := func(s *evidence.Snapshot) { *s = evidence.Snapshot{Time: s.Time} }
	backwards := func(s *evidence.Snapshot) {
		for k := range s.Counters {
			s.Counters[k] += 1e9
		}
		for k := range s.Conntrack.Stats {
			s.Conntrack.Stats[k] += 1e9
		}
		ticks(cpuFull, cpuFull)(s)
		iface("eth0", func(i *evidence.Interface) { i.RxDrop += 1e6; i.TxDrop += 1e6 })(s)
		s.Softnet[0].Dropped += 1e6
	}
	tests := []struct {
		name string
		b    *evidence.Bundle
	}{
		{"bare snapshots", bundle(bare, bare)},
		{"one bare snapshot", single(bare)},
		{"bare first snapshot", bundle(bare, nil)},
		{"bare last snapshot", bundle(nil, bare)},
		{"every counter went backwards", bundle(backwards, nil)},
		{"same instant", bundle(nil, func(s *evidence.Snapshot) { s.Time = t0 })},
		{"last before first", bundle(nil, func(s *evidence.Snapshot) { s.Time = t0.Add(-time.Second) })},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Check(tt.b); len(got) != 0 {
				t.Errorf("Run() = %v, want no findings", keys(got))
			}
		})
	}
}
