package rules

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cgroup"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// fixtureGroup resolves PID 1234's group in one of package cgroup's
// fixtures (v1: captured on this project's host; v2: in the kernel's
// format).
func fixtureGroup(t *testing.T, name string) *cgroup.Group {
	t.Helper()
	g, err := cgroup.Resolve(os.DirFS("../cgroup/testdata/"+name), 1234)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// cpuRun is a 5-second run whose server's threads spent each second as
// c says, with p50 90 ms and p99 400 ms, 100 requests a second.
func cpuRun(s *app.Server, c app.CPU, waits map[string]int) *Input {
	b := bundle(nil, idleCPU(0.2))
	in := serverRun(b, s)
	start := t0.Add(-time.Second)
	in.Run.LoadStart, in.Run.LoadEnd = start, start.Add(5*time.Second+100*time.Millisecond)
	lr := in.Run.Load
	lr.Requests = 500
	lr.Latency = load.Latency{Mean: 120 * time.Millisecond, P50: 90 * time.Millisecond, P99: 400 * time.Millisecond}
	for i := range 5 {
		at := start.Add(time.Duration(i) * time.Second)
		lr.Timeline = append(lr.Timeline, load.Second{Index: i, Start: at, Length: time.Second, Requests: 100, P50: 90 * time.Millisecond, P99: 400 * time.Millisecond})
		cc := c
		s.Samples = append(s.Samples, app.Sample{Time: at.Add(time.Second), Workers: 1, Waits: waits, CPU: &cc})
	}
	return in
}

// throttled is a second of 2 threads under a 0.2 CPU quota on an idle
// host, as the v1 capture measured it: 0.2 s on CPU, 1.6 s runnable.
var throttled = app.CPU{Span: time.Second, Threads: 4, ThreadTime: 4 * time.Second, OnCPU: 200 * time.Millisecond, RunDelay: 1600 * time.Millisecond,
	CPUs: 2, IdleCPUs: 1.6, Periods: 10, Throttled: 10, ThrottledTime: 1550 * time.Millisecond}

func TestThrottle(t *testing.T) {
	running := map[string]int{app.WaitRunning: 2, app.WaitLock: 2}
	for _, tc := range []struct {
		name, group string
		rt          *app.Runtime
		evidence    []string
		fix         string
	}{
		{"v1, Go before 1.25", "v1", &app.Runtime{Name: app.RuntimeGo, Version: "go1.24.2"},
			[]string{"cgroup v1 /ndtest limits goapi 0.0.0.0:8080 to 0.2 CPU (20ms per 100ms period): cpu.cfs_quota_us 20000, cpu.cfs_period_us 100000",
				"throttled in 50 of 50 periods (100%)", "wanted 1.80 CPUs", "idled", "of the load's p50 90.00ms"},
			"Go go1.24.2 sizes GOMAXPROCS to the host's CPUs, not the quota: set GOMAXPROCS=1"},
		{"v2, a JVM told of 8 processors", "v2", &app.Runtime{Name: app.RuntimeJava, Parallelism: 8, Source: "-XX:ActiveProcessorCount=8", QuotaAware: true},
			[]string{`cpu.max "20000 100000" (/sys/fs/cgroup/system.slice/api.service/cpu.max)`},
			"the JVM sizes its GC and pools for 8 processors (-XX:ActiveProcessorCount=8): set -XX:ActiveProcessorCount=1"},
		{"v2 pod limit, nginx with 4 workers", "v2pod", &app.Runtime{Name: app.RuntimeNginx, Parallelism: 4, Source: "worker_processes 4 (/etc/nginx/nginx.conf:3)"},
			[]string{"limits goapi 0.0.0.0:8080 to 0.5 CPU", "kubepods-burstable-pod7f3a.slice/cpu.max"},
			"nginx runs 4 workers (worker_processes 4 (/etc/nginx/nginx.conf:3)) on a quota of 0.5 CPU: worker_processes 1;"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &app.Server{Role: "front", Kind: "goapi", Addr: "0.0.0.0:8080", PIDs: []int{300}, CGroup: fixtureGroup(t, tc.group), Runtime: tc.rt}
			fs := checkThrottle(cpuRun(s, throttled, running))
			if len(fs) != 1 || fs[0].ID != CPUQuotaThrottling || fs[0].Severity != report.Critical || fs[0].Subject != "goapi 0.0.0.0:8080" {
				t.Fatalf("checkThrottle = %+v", fs)
			}
			for _, e := range tc.evidence {
				if !hasEvidence(fs[0], e) {
					t.Errorf("no evidence with %q:\n%s", e, strings.Join(evidenceTexts(fs[0]), "\n"))
				}
			}
			if !strings.Contains(strings.Join(fixOf(fs[0]), "\n"), tc.fix) {
				t.Errorf("fix %q, want %q", fixOf(fs[0]), tc.fix)
			}
			if a := fs[0].Actions[0]; a.Kind != report.ActionCommand || !strings.HasPrefix(a.Command, "echo ") || !strings.Contains(a.Note, "raise the limit to 2.5 CPUs: it wanted 1.80") {
				t.Errorf("first action %+v", a)
			}
		})
	}
	// Quiet: a limited group that never ran out of its quota; a group
	// without a limit; throttled once in a while.
	s := &app.Server{Kind: "goapi", Addr: "0.0.0.0:8080", CGroup: fixtureGroup(t, "v2")}
	calm := throttled
	calm.Throttled, calm.ThrottledTime, calm.RunDelay = 0, 0, 5*time.Millisecond
	if fs := checkThrottle(cpuRun(s, calm, running)); fs != nil {
		t.Errorf("unthrottled: %+v", fs)
	}
	rare := throttled
	rare.Throttled, rare.ThrottledTime, rare.RunDelay = 1, 20*time.Millisecond, 20*time.Millisecond
	if fs := checkThrottle(cpuRun(s, rare, running)); fs != nil {
		t.Errorf("throttled once a second: %+v", fs)
	}
	s.CGroup = &cgroup.Group{Version: 1, Path: "/"}
	if fs := checkThrottle(cpuRun(s, throttled, running)); fs != nil {
		t.Errorf("no limit: %+v", fs)
	}
}

// TestAppSlowFollowsThreads: a throttled service's app-slow advice is
// the quota, not a lock, when the throttle rule did not fire (a quota
// below its thresholds still dominates the threads' busy time).
func TestAppSlowFollowsThreads(t *testing.T) {
	s := &app.Server{Role: "front", Kind: "goapi", Addr: "0.0.0.0:8080", PIDs: []int{300}, CGroup: fixtureGroup(t, "v1"), Runtime: &app.Runtime{Name: app.RuntimeGo}}
	in := cpuRun(s, throttled, map[string]int{app.WaitRunning: 2, app.WaitLock: 2})
	in.Bundle, in.Side = nil, ""
	fs := checkAppSlow(in)
	if len(fs) != 1 || !strings.HasPrefix(fixOf(fs[0])[0], "the threads wait for their cgroup's CPU quota") {
		t.Fatalf("app-slow %+v", fs)
	}
	if !hasEvidence(fs[0], "goapi threads' busy time, as the scheduler accounts it: throttled by the CPU quota 8") {
		t.Errorf("evidence %q", evidenceTexts(fs[0]))
	}
	in.Found = []report.Finding{{ID: CPUQuotaThrottling, Status: report.Active}}
	if fs := checkAppSlow(in); fs != nil {
		t.Errorf("with the throttling finding: %+v", fs)
	}
}

func TestTimeSplit(t *testing.T) {
	s := &app.Server{Kind: "goapi", Addr: "0.0.0.0:8080", Runtime: &app.Runtime{Name: app.RuntimeGo}}
	ts := TimeSplit(cpuRun(s, throttled, map[string]int{app.WaitRunning: 2, app.WaitLock: 2}).Run)
	if ts == nil {
		t.Fatal("no split")
	}
	// 1.8 s of busy thread time a second for 100 requests: 18 ms each of
	// a 120 ms mean; the threads were held 89 % of it, so that much of
	// the time outside them was queued for them.
	if got := ts.P50.Share(report.BucketThrottled); got < 0.8 || got > 0.95 {
		t.Errorf("p50 throttled share %.2f, want most; %s", got, ts.Text())
	}
	if ts.P50.Share(report.BucketOutside) <= 0 || ts.PerRequest != 18*time.Millisecond {
		t.Errorf("split %+v", ts)
	}
	if !strings.HasPrefix(ts.Text(), "p50 90.00ms ≈ throttled by the CPU quota") {
		t.Errorf("text %q", ts.Text())
	}
	// A server that hardly works: the time is outside its threads.
	idle := app.CPU{Span: time.Second, Threads: 2, ThreadTime: 2 * time.Second, OnCPU: 10 * time.Millisecond, CPUs: 2, IdleCPUs: 1.9}
	s = &app.Server{Kind: "goapi", Addr: "0.0.0.0:8080", Runtime: &app.Runtime{Name: app.RuntimeGo}}
	ts = TimeSplit(cpuRun(s, idle, map[string]int{app.WaitIdle: 2}).Run)
	if got := ts.P99.Share(report.BucketOutside); got < 0.99 {
		t.Errorf("outside share %.3f: %s", got, ts.Text())
	}
}

// TestTimeSplitUnread: requests a front server had not read, 6 of them
// at any look for 100 answered a second, waited 60 ms each (Little's
// law): half of a 120 ms mean goes to "unread", out of the time outside
// the threads. Neither the look taken as the load began (every
// connection's first request just sent), nor a dependency's port, nor a
// port's second listener counts; from fewer than three looks nothing is
// measured.
func TestTimeSplitUnread(t *testing.T) {
	idle := app.CPU{Span: time.Second, Threads: 4, ThreadTime: 4 * time.Second, OnCPU: 100 * time.Millisecond, CPUs: 2, IdleCPUs: 1.8}
	s := &app.Server{Role: "front", Kind: "pyapi", Addr: "0.0.0.0:8080", Runtime: &app.Runtime{Name: app.RuntimePython}}
	in := cpuRun(s, idle, map[string]int{app.WaitIdle: 4})
	r := in.Run
	look := func(at time.Time, unread int) evidence.Snapshot {
		snap := healthy(at)
		snap.Sockets.Listeners = []evidence.Listener{
			{Proto: "tcp", Addr: "0.0.0.0:8080", Unread: unread},
			{Proto: "tcp", Addr: "0.0.0.0:8080", Unread: unread}, // the same port's counts again
			{Proto: "tcp", Addr: "127.0.0.1:6379", Unread: 40},   // a dependency
		}
		return snap
	}
	b := r.Server().Bundle
	b.Snapshots = []evidence.Snapshot{look(r.LoadStart.Add(-time.Second), 0), look(r.LoadStart.Add(10*time.Millisecond), 50)}
	for i, n := range []int{5, 7, 5, 7, 6} {
		b.Snapshots = append(b.Snapshots, look(r.LoadStart.Add(time.Duration(i)*time.Second+500*time.Millisecond), n))
	}
	ts := TimeSplit(r)
	if got := ts.P50.Share(report.BucketUnread); got < 0.48 || got > 0.52 {
		t.Errorf("unread share %.3f, want 0.50: %s", got, ts.Text())
	}
	if got := ts.P50.Share(report.BucketOutside); got < 0.47 || got > 0.51 {
		t.Errorf("outside share %.3f, want the rest of 0.49: %s", got, ts.Text())
	}
	if !strings.Contains(ts.Text(), "unread in the server's sockets 45.00ms (50%)") {
		t.Errorf("text %q", ts.Text())
	}
	b.Snapshots = b.Snapshots[:4]
	if got := TimeSplit(r).P50.Share(report.BucketUnread); got != 0 {
		t.Errorf("from two looks: unread share %.3f, want none", got)
	}
}

// TestAppSlowBusyHost: on a host whose CPUs other work keeps busy, a
// server whose threads were blocked off CPU most of their busy time (a
// contended lock) still holds its requests, and is named, with how much
// its threads were blocked; a server whose threads ran or waited for a
// CPU there is not (the CPU rules speak).
func TestAppSlowBusyHost(t *testing.T) {
	busyHost := func(c app.CPU, waits map[string]int) *Input {
		s := &app.Server{Role: "front", Kind: "pyapi", Addr: "0.0.0.0:8080", PIDs: []int{300}, Runtime: &app.Runtime{Name: app.RuntimePython}}
		in := cpuRun(s, c, waits)
		in.Run.Sides[0].Bundle = bundle(nil, idleCPU(0.9))
		in.Bundle, in.Side = nil, ""
		return in
	}
	locked := app.CPU{Span: time.Second, Threads: 4, ThreadTime: 4 * time.Second, OnCPU: 150 * time.Millisecond, RunDelay: 250 * time.Millisecond, CPUs: 2, IdleCPUs: 0.2}
	fs := checkAppSlow(busyHost(locked, map[string]int{app.WaitLock: 3, app.WaitRunning: 1}))
	if len(fs) != 1 || fs[0].Title != "The application holds requests (p50 90ms): its threads are blocked off CPU 90% of their busy time" {
		t.Fatalf("blocked on a lock on a busy host: %+v", fs)
	}
	if !hasEvidence(fs[0], "the host's CPUs 90% busy, while the server's threads were blocked off CPU 90%") || !strings.HasPrefix(fixOf(fs[0])[0], "find the contended lock") {
		t.Errorf("evidence %q, fix %q", evidenceTexts(fs[0]), fixOf(fs[0]))
	}
	running := app.CPU{Span: time.Second, Threads: 4, ThreadTime: 4 * time.Second, OnCPU: 1600 * time.Millisecond, RunDelay: 2200 * time.Millisecond, CPUs: 2, IdleCPUs: 0}
	if fs := checkAppSlow(busyHost(running, map[string]int{app.WaitRunning: 3, app.WaitLock: 1})); fs != nil {
		t.Errorf("on CPU or waiting for one on a busy host: %+v", fs)
	}
	// Not accounted (no CPU samples): a busy host says nothing.
	in := busyHost(locked, map[string]int{app.WaitLock: 3})
	for i := range in.Run.Servers[0].Samples {
		in.Run.Servers[0].Samples[i].CPU = nil
	}
	if fs := checkAppSlow(in); fs != nil {
		t.Errorf("unaccounted threads on a busy host: %+v", fs)
	}
}
