package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// contended is a second of a server pinned to one CPU with a spinning
// neighbour: half on CPU, half runnable, that CPU never idle.
var contended = app.CPU{Span: time.Second, Threads: 2, ThreadTime: 2 * time.Second, OnCPU: 500 * time.Millisecond, RunDelay: 480 * time.Millisecond,
	CPUs: 1, IdleCPUs: 0, Others: []app.Neighbour{{PID: 999, Comm: "busyloop", OnCPU: 490 * time.Millisecond}}}

// quick makes a run's requests take what its server's threads held
// them for: a mean of 12 ms (p50 9 ms, p99 40 ms), ~10 ms of them in
// the threads.
func quick(in *Input) *Input {
	in.Run.Load.Latency = load.Latency{Mean: 12 * time.Millisecond, P50: 9 * time.Millisecond, P99: 40 * time.Millisecond}
	for i := range in.Run.Load.Timeline {
		in.Run.Load.Timeline[i].P50, in.Run.Load.Timeline[i].P99 = 9*time.Millisecond, 40*time.Millisecond
	}
	return in
}

func TestRunQueue(t *testing.T) {
	running := map[string]int{app.WaitRunning: 1, app.WaitIdle: 1}
	s := &app.Server{Role: "front", Kind: "python3", Addr: "0.0.0.0:8080", PIDs: []int{300}}
	fs := checkRunQueue(quick(cpuRun(s, contended, running)))
	if len(fs) != 1 || fs[0].ID != RunQueueContention || fs[0].Subject != "python3 0.0.0.0:8080" || fs[0].Severity != report.Warning {
		t.Fatalf("checkRunQueue = %+v", fs)
	}
	for _, e := range []string{"waited, runnable, 480.00ms a second for a CPU", "who else ran there: busyloop (pid 999) 0.49 CPU", "the 1 CPU(s) it may run on idled 0.00 CPU"} {
		if !hasEvidence(fs[0], e) {
			t.Errorf("no evidence with %q:\n%s", e, strings.Join(evidenceTexts(fs[0]), "\n"))
		}
	}
	if fix := strings.Join(fixOf(fs[0]), "\n"); !strings.Contains(fix, "taskset -a -pc CPULIST 999") || !strings.Contains(fix, "the server may run on 1 of the host's 2 CPUs") {
		t.Errorf("fix %q", fixOf(fs[0]))
	}
	// Critical: the neighbour held nearly all of the one CPU, and the
	// threads waited more than twice as long as they ran.
	s = &app.Server{Role: "front", Kind: "python3", Addr: "0.0.0.0:8080", PIDs: []int{300}}
	c := contended
	c.RunDelay, c.OnCPU, c.Others = 1200*time.Millisecond, 300*time.Millisecond, []app.Neighbour{{PID: 999, Comm: "busyloop", OnCPU: 900 * time.Millisecond}}
	if fs := checkRunQueue(quick(cpuRun(s, c, running))); len(fs) != 1 || fs[0].Severity != report.Critical {
		t.Errorf("a CPU taken: %+v", fs)
	}
	// A second kind of server, whose neighbours only the profile saw
	// (the accounting named none): a JVM beside a stress test.
	s = &app.Server{Role: "front", Kind: "java", Addr: "0.0.0.0:8443", PIDs: []int{400}}
	c = contended
	c.Others, c.RunDelay = nil, 700*time.Millisecond
	in := quick(cpuRun(s, c, running))
	in.Run.Profile = &cpuprof.Profile{Hz: 99, Duration: 5 * time.Second, Samples: 990, Others: []cpuprof.Other{{PID: 77, Comm: "stress-ng", Samples: 300}}}
	fs = checkRunQueue(in)
	if len(fs) != 1 || fs[0].Severity != report.Warning || !hasEvidence(fs[0], "stress-ng (pid 77) 0.61 CPU, from the profile") {
		t.Fatalf("from the profile: %+v", fs)
	}
	// Quiet: threads that wait for each other (no one else ran there);
	// a wait the quota explains; no wait; a wait the requests hardly
	// feel (their threads mostly wait on a backend).
	s = &app.Server{Kind: "python3", Addr: "0.0.0.0:8080"}
	c = contended
	c.ThreadTime, c.RunDelay = 3*time.Second, 60*time.Millisecond
	if fs := checkRunQueue(quick(cpuRun(s, c, map[string]int{app.WaitRunning: 1, app.WaitNetwork: 2}))); fs != nil {
		t.Errorf("a wait the requests hardly feel: %+v", fs)
	}
	s = &app.Server{Kind: "python3", Addr: "0.0.0.0:8080"}
	c = contended
	c.Others = nil
	if fs := checkRunQueue(quick(cpuRun(s, c, running))); fs != nil {
		t.Errorf("its own threads: %+v", fs)
	}
	s = &app.Server{Kind: "python3", Addr: "0.0.0.0:8080"}
	if fs := checkRunQueue(quick(cpuRun(s, throttled, running))); fs != nil {
		t.Errorf("throttled: %+v", fs)
	}
	s = &app.Server{Kind: "python3", Addr: "0.0.0.0:8080"}
	c = contended
	c.RunDelay = 10 * time.Millisecond
	if fs := checkRunQueue(quick(cpuRun(s, c, running))); fs != nil {
		t.Errorf("no wait: %+v", fs)
	}
}

// TestRunQueueOwnLoad: an agent on the load generator's host sees the
// load generator (another netdoctor process) take the servers' CPUs.
// That is netdoctor's own load, never a neighbour (CI: the lab's twin
// through an agent reported run-queue contention that the run sampling
// the namespace itself, which skips its own PID, never did): the run's
// evidence forgets it before the diagnosis (evidence.Run.ForgetOwn, in
// run.Diagnose). The same PID seen from another kernel or PID namespace
// is a real neighbour.
func TestRunQueueOwnLoad(t *testing.T) {
	running := map[string]int{app.WaitRunning: 1, app.WaitIdle: 1}
	for _, tc := range []struct {
		name      string
		boot      string
		pidns     uint64
		neighbour bool
	}{
		{"same kernel and PID namespace", "b1", 7, false},
		{"another kernel", "b2", 7, true},
		{"another PID namespace", "b1", 8, true},
	} {
		s := &app.Server{Role: "front", Kind: "nginx", Addr: "0.0.0.0:80", PIDs: []int{300}}
		c := contended
		c.Others = []app.Neighbour{{PID: 999, Comm: "netdoctor", OnCPU: 490 * time.Millisecond}}
		in := quick(cpuRun(s, c, running))
		in.Run.Sides[0].Bundle.Host = evidence.Host{BootID: "b1", PIDNSInode: 7, PID: 50}
		client := bundle(nil, idleCPU(0.2))
		client.Host = evidence.Host{BootID: tc.boot, PIDNSInode: tc.pidns, PID: 999}
		in.Run.Sides = append(in.Run.Sides, &evidence.RunSide{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: client})
		in.Run.ForgetOwn()
		fs := checkRunQueue(in)
		if got := len(fs) == 1 && hasEvidence(fs[0], "netdoctor (pid 999)"); got != tc.neighbour {
			t.Errorf("%s: named the load generator %v, want %v: %+v", tc.name, got, tc.neighbour, fs)
		}
		// The profile's others likewise.
		c.Others = nil
		in = quick(cpuRun(&app.Server{Role: "front", Kind: "nginx", Addr: "0.0.0.0:80", PIDs: []int{300}}, c, running))
		in.Run.Sides[0].Bundle.Host = evidence.Host{BootID: "b1", PIDNSInode: 7, PID: 50}
		in.Run.Sides = append(in.Run.Sides, &evidence.RunSide{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: client})
		in.Run.Profile = &cpuprof.Profile{Hz: 99, Duration: 5 * time.Second, Samples: 990, Self: 10, Others: []cpuprof.Other{{PID: 999, Comm: "netdoctor", Samples: 300}}}
		in.Run.ForgetOwn()
		if self := in.Run.Profile.Self; (self == 310) == tc.neighbour {
			t.Errorf("%s: the profile's own samples %d", tc.name, self)
		}
		fs = checkRunQueue(in)
		if got := len(fs) == 1 && hasEvidence(fs[0], "netdoctor (pid 999)"); got != tc.neighbour {
			t.Errorf("%s, from the profile: named the load generator %v, want %v: %+v", tc.name, got, tc.neighbour, fs)
		}
	}
}

// TestRunQueueEndsWorker: the kernel's worker that sends the listeners of
// the sock_diag destroy groups each ended connection's last state
// (kworker/N:M-sock_diag_events) runs for netdoctor when one of the
// run's sides listened (evidence.Run.ForgetOwn): never a neighbour then,
// in the samples or the profile. Where no side listened, someone else
// did, and the worker is a neighbour like any other.
func TestRunQueueEndsWorker(t *testing.T) {
	running := map[string]int{app.WaitRunning: 1, app.WaitIdle: 1}
	for _, tc := range []struct {
		name      string
		comm      string
		watched   bool
		neighbour bool
	}{
		{"watched, last ran", "kworker/1:2-sock_diag_events", true, false},
		{"watched, running", "kworker/u8:0+sock_diag_events", true, false},
		{"not watched", "kworker/1:2-sock_diag_events", false, true},
		{"another workqueue", "kworker/1:2-events", true, true},
		{"a process named like it", "sock_diag_events", true, true},
	} {
		s := &app.Server{Role: "front", Kind: "nginx", Addr: "0.0.0.0:80", PIDs: []int{300}}
		c := contended
		c.Others = []app.Neighbour{{PID: 77, Comm: tc.comm, OnCPU: 490 * time.Millisecond}}
		in := quick(cpuRun(s, c, running))
		b := in.Run.Sides[0].Bundle
		b.Host = evidence.Host{BootID: "b1", PIDNSInode: 7, PID: 50}
		if tc.watched {
			b.Snapshots[1].Senders = &evidence.Senders{Ends: true}
		}
		in.Run.Profile = &cpuprof.Profile{Hz: 99, Duration: 5 * time.Second, Samples: 990, Self: 10, Others: []cpuprof.Other{{PID: 77, Comm: tc.comm, Samples: 300}}}
		in.Run.ForgetOwn()
		fs := checkRunQueue(in)
		if got := len(fs) == 1 && hasEvidence(fs[0], tc.comm+" (pid 77)"); got != tc.neighbour {
			t.Errorf("%s: named %s a neighbour %v, want %v: %+v", tc.name, tc.comm, got, tc.neighbour, fs)
		}
		if self := in.Run.Profile.Self; (self == 310) == tc.neighbour {
			t.Errorf("%s: the profile's own samples %d", tc.name, self)
		}
	}
}
