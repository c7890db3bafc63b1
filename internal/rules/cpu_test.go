package rules

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// tick returns a change that adds d's ticks to the /proc/stat line of
// CPU cpu (-1 for the aggregate line).
func tick(cpu int, d evidence.CPU) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		for i := range s.CPU {
			c := &s.CPU[i]
			if c.CPU != cpu {
				continue
			}
			c.User += d.User
			c.Nice += d.Nice
			c.System += d.System
			c.Idle += d.Idle
			c.IOWait += d.IOWait
			c.IRQ += d.IRQ
			c.SoftIRQ += d.SoftIRQ
			c.Steal += d.Steal
		}
	}
}

// ticks returns a change that spends one second (100 USER_HZ ticks) on
// each CPU as given, and the sum on the aggregate line.
func ticks(per ...evidence.CPU) func(*evidence.Snapshot) {
	var sum evidence.CPU
	fs := make([]func(*evidence.Snapshot), 0, len(per)+1)
	for i, d := range per {
		fs = append(fs, tick(i, d))
		sum.User += d.User
		sum.Nice += d.Nice
		sum.System += d.System
		sum.Idle += d.Idle
		sum.IOWait += d.IOWait
		sum.IRQ += d.IRQ
		sum.SoftIRQ += d.SoftIRQ
		sum.Steal += d.Steal
	}
	return all(append(fs, tick(-1, sum))...)
}

var (
	cpuIdle = evidence.CPU{User: 15, System: 5, Idle: 80}
	cpuFull = evidence.CPU{User: 50, System: 30, SoftIRQ: 20}
)

var _ = addTable("checkCPU", checkCPU, cpuCases)

func cpuCases() []ruleCase {
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, ticks(cpuIdle, cpuIdle)),
		},
		{
			name:   "no time passed on the CPUs",
			bundle: bundle(nil, nil),
		},
		{
			name:   "all CPUs saturated",
			bundle: bundle(nil, ticks(cpuFull, cpuFull)),
			want: []want{{ID: "cpu-saturated", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"cpu0 100% busy (softirq 20%)", "cpu1 100% busy (softirq 20%)", "all CPUs: user 50%, system 30%, softirq 20%"}}},
		},
		{
			name:   "one CPU does all receive work",
			bundle: bundle(nil, ticks(evidence.CPU{User: 5, System: 30, SoftIRQ: 60, Idle: 5}, cpuIdle)),
			want: []want{{ID: "cpu-saturated", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"cpu0 95% busy (softirq 60%)", "all CPUs: user 10%, system 18%, softirq 30%"}}},
		},
		{
			name:   "90% busy is saturated",
			bundle: bundle(nil, ticks(evidence.CPU{User: 90, Idle: 10}, evidence.CPU{User: 90, Idle: 10})),
			want:   []want{{ID: "cpu-saturated", Status: report.Active, Severity: report.Warning, Evidence: []string{"cpu0 90% busy (softirq 0%)"}}},
		},
		{
			name:   "one hot CPU beside one 80% busy: a host near its limit, no single bottleneck",
			bundle: bundle(nil, ticks(evidence.CPU{User: 60, SoftIRQ: 37, Idle: 3}, evidence.CPU{User: 80, Idle: 20})),
		},
		{
			name:   "one hot CPU beside one 75% busy",
			bundle: bundle(nil, ticks(evidence.CPU{User: 60, SoftIRQ: 37, Idle: 3}, evidence.CPU{User: 75, Idle: 25})),
			want:   []want{{ID: "cpu-saturated", Status: report.Active, Severity: report.Warning, Evidence: []string{"cpu0 97% busy (softirq 37%)"}}},
		},
		{
			name:   "89% busy is not",
			bundle: bundle(nil, ticks(evidence.CPU{User: 89, Idle: 11}, evidence.CPU{User: 89, Idle: 11})),
		},
		{
			name:   "I/O wait counts as idle",
			bundle: bundle(nil, ticks(evidence.CPU{User: 20, IOWait: 80}, evidence.CPU{User: 20, IOWait: 80})),
		},
		{
			name:   "steal and irq count as busy",
			bundle: bundle(nil, ticks(evidence.CPU{Steal: 50, IRQ: 45, Idle: 5}, cpuIdle)),
			want:   []want{{ID: "cpu-saturated", Status: report.Active, Severity: report.Warning, Evidence: []string{"cpu0 95% busy"}}},
		},
		{
			name: "no aggregate line",
			bundle: bundle(nil, all(ticks(cpuFull, cpuIdle), func(s *evidence.Snapshot) {
				s.CPU = s.CPU[1:]
			})),
			want: []want{{ID: "cpu-saturated", Status: report.Active, Severity: report.Warning, Evidence: []string{"cpu0 100% busy"}}},
		},
		{
			name: "window under half a second",
			bundle: bundle(nil, all(ticks(evidence.CPU{User: 40}, evidence.CPU{User: 40}), func(s *evidence.Snapshot) {
				s.Time = t0.Add(400 * time.Millisecond)
			})),
		},
		{
			name:   "tick counters went backwards",
			bundle: bundle(ticks(cpuFull, cpuFull), nil),
		},
		{
			name: "a CPU only in the last snapshot",
			bundle: bundle(nil, func(s *evidence.Snapshot) {
				s.CPU = append(s.CPU, evidence.CPU{CPU: 2, User: 1000})
			}),
		},
		{
			name:   "no CPU lines",
			bundle: bundle(func(s *evidence.Snapshot) { s.CPU = nil }, ticks(cpuFull, cpuFull)),
		},
		{
			name:   "one snapshot",
			bundle: single(nil),
		},
	}
}

func TestCheckCPU(t *testing.T) {
	runCases(t, "checkCPU", checkCPU, cpuCases())
}

// TestCPUGenerator: in a run, the CPU the load generator spent on the
// host it shares is the load's. Saturation it accounts for is not a
// finding; saturation beyond it still is, and on another host it does
// not count.
func TestCPUGenerator(t *testing.T) {
	run := func(cpuSeconds float64, client *evidence.Bundle) *evidence.Run {
		r := &evidence.Run{Load: &load.Result{}, LoadStart: t0, LoadEnd: t0.Add(time.Second)}
		r.Load.Self.CPUSeconds = cpuSeconds
		r.Sides = []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: client}}
		return r
	}
	withBoot := func(b *evidence.Bundle, id string) *evidence.Bundle { b.Host.BootID = id; return b }
	allFull := func() *evidence.Bundle { return withBoot(bundle(nil, ticks(cpuFull, cpuFull)), "boot-a") }
	oneHot := func() *evidence.Bundle {
		return withBoot(bundle(nil, ticks(evidence.CPU{User: 97, Idle: 3}, cpuIdle)), "boot-a")
	}
	tests := []struct {
		name string
		in   *Input
		want int
	}{
		{"all saturated, the generator took 1.2 of 2 CPUs", &Input{Bundle: allFull(), Side: report.Client, Run: run(1.2, allFull())}, 0},
		{"all saturated, the generator took 0.1 of 2 CPUs", &Input{Bundle: allFull(), Side: report.Client, Run: run(0.1, allFull())}, 1},
		{"one hot CPU, a one-thread generator on it", &Input{Bundle: oneHot(), Side: report.Client, Run: run(0.95, oneHot())}, 0},
		{"one hot CPU, the generator took little", &Input{Bundle: oneHot(), Side: report.Client, Run: run(0.2, oneHot())}, 1},
		{"the server's side on the client's boot", &Input{Bundle: allFull(), Side: report.Server, Run: run(1.2, allFull())}, 0},
		{"the server's side on another host", &Input{Bundle: withBoot(allFull(), "boot-b"), Side: report.Server, Run: run(1.2, allFull())}, 1},
		{"no run", on(allFull()), 1},
	}
	for _, tt := range tests {
		if got := checkCPU(tt.in); len(got) != tt.want {
			t.Errorf("%s: %d findings %v, want %d", tt.name, len(got), keys(got), tt.want)
		}
	}
}

// TestCPUTitle checks the title that separates one hot CPU from all.
func TestCPUTitle(t *testing.T) {
	tests := []struct {
		name string
		b    *evidence.Bundle
		want string
	}{
		{"all", bundle(nil, ticks(cpuFull, cpuFull)), "All CPUs are saturated"},
		{"one", bundle(nil, ticks(cpuFull, cpuIdle)), "1 of 2 CPUs are saturated while others have idle time"},
	}
	for _, tt := range tests {
		got := checkCPU(on(tt.b))
		if len(got) != 1 {
			t.Fatalf("%s: checkCPU(on()) = %v, want one finding", tt.name, keys(got))
		}
		if diff := cmp.Diff(tt.want, got[0].Title); diff != "" {
			t.Errorf("%s: checkCPU(on()) title mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestCPUHottest: in a run with an on-CPU profile, a saturated host's
// finding says where the servers' CPU went.
func TestCPUHottest(t *testing.T) {
	in := serverRun(bundle(nil, ticks(cpuFull, cpuFull)), nginxProxy(false))
	in.Run.Profile = portSearchProfile(t)
	in.Run.Profile.Duration = 2 * time.Second
	in.Run.Load.Self.CPUSeconds = 0
	fs := checkCPU(in)
	if len(fs) != 1 || !hasEvidence(fs[0], "the on-CPU profile: nginx 0.0.0.0:80 used 0.50 CPU, 70% of it in tcp_sendmsg") {
		t.Fatalf("checkCPU %+v", fs)
	}
}

// TestCPUSoftIRQAdvice: a CPU saturated in softirq gets RSS and interrupt
// advice only where the namespace has a physical NIC; on virtual devices
// (a veth), RPS; a CPU busy in the application, no softirq advice at all
// (issue 36: ring, IRQ and RSS advice only for physical NICs).
func TestCPUSoftIRQAdvice(t *testing.T) {
	soft := ticks(evidence.CPU{User: 5, System: 30, SoftIRQ: 60, Idle: 5}, cpuIdle)
	dev := func(kind, driver string) func(*evidence.Snapshot) {
		return func(s *evidence.Snapshot) {
			for i := range s.Interfaces {
				if s.Interfaces[i].Name != "lo" {
					s.Interfaces[i].Link = &evidence.Link{Name: s.Interfaces[i].Name, Kind: kind, Driver: driver, MTU: 1500}
				}
			}
		}
	}
	for _, tc := range []struct {
		name      string
		last      func(*evidence.Snapshot)
		rss, none bool
	}{
		{"softirq on a physical NIC", all(soft, dev("device", "ixgbe")), true, false},
		{"softirq on a veth", all(soft, dev("veth", "")), false, false},
		{"softirq, devices not described", soft, true, false},
		{"the application's CPU", all(ticks(evidence.CPU{User: 90, System: 5, Idle: 5}, cpuIdle), dev("device", "ixgbe")), false, true},
	} {
		got := checkCPU(on(bundle(nil, tc.last)))
		if len(got) != 1 {
			t.Fatalf("%s: %+v", tc.name, got)
		}
		softirq, rss := hasFix(got[0], "high softirq"), hasFix(got[0], "RSS queues")
		switch {
		case tc.none && softirq:
			t.Errorf("%s: softirq advice for a CPU busy elsewhere: %q", tc.name, fixOf(got[0]))
		case !tc.none && !softirq:
			t.Errorf("%s: no softirq advice: %q", tc.name, fixOf(got[0]))
		case rss != tc.rss:
			t.Errorf("%s: RSS advice %v, want %v: %q", tc.name, rss, tc.rss, fixOf(got[0]))
		}
		if !tc.rss && !tc.none && !hasFix(got[0], "rps_cpus") {
			t.Errorf("%s: no RPS for virtual devices: %q", tc.name, fixOf(got[0]))
		}
	}
}
