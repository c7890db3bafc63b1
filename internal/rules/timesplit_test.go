package rules

import (
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestTimeSplitIdleThreads: a server whose threads idle 97 % of the
// window, 30 % of their few busy milliseconds runnable (waiting for a
// CPU). A request found a thread free: the time outside the threads is
// not queueing for them, and "waiting for a CPU" is the threads' own
// share of it (about 1 % of the p50), not 30 % of the round trip as when
// the outside time took the threads' runnable share whatever their load.
// Saturated threads (the same share runnable, busy all the time) still
// hold the outside time queued for them.
func TestTimeSplitIdleThreads(t *testing.T) {
	idle := app.CPU{Span: time.Second, Threads: 4, ThreadTime: 4 * time.Second, OnCPU: 84 * time.Millisecond, RunDelay: 36 * time.Millisecond, CPUs: 2, IdleCPUs: 1.9}
	s := &app.Server{Role: "front", Kind: "pyapi", Addr: "0.0.0.0:8080", Runtime: &app.Runtime{Name: app.RuntimePython}}
	ts := TimeSplit(cpuRun(s, idle, map[string]int{app.WaitIdle: 4}).Run)
	if got := ts.P50.Share(report.BucketWaiting); got > 0.03 {
		t.Errorf("threads idle 97 %%: waiting for a CPU %.3f of the p50, want about 0.01: %s", got, ts.Text())
	}
	if got := ts.P50.Share(report.BucketOutside); got < 0.95 {
		t.Errorf("outside share %.3f, want nearly all: %s", got, ts.Text())
	}
	busy := app.CPU{Span: time.Second, Threads: 4, ThreadTime: 4 * time.Second, OnCPU: 2800 * time.Millisecond, RunDelay: 1200 * time.Millisecond, CPUs: 2}
	s = &app.Server{Role: "front", Kind: "pyapi", Addr: "0.0.0.0:8080", Runtime: &app.Runtime{Name: app.RuntimePython}}
	ts = TimeSplit(cpuRun(s, busy, map[string]int{app.WaitRunning: 4}).Run)
	if got := ts.P50.Share(report.BucketWaiting); got < 0.29 || got > 0.31 {
		t.Errorf("saturated threads: waiting for a CPU %.3f of the p50, want their 0.30: %s", got, ts.Text())
	}
	// A Go program's spare threads parked: its capacity is its
	// GOMAXPROCS threads', not every thread's.
	if c := threadCapacity(app.CPU{Span: time.Second, ThreadTime: 6 * time.Second, CPUs: 2}, &app.Runtime{Name: app.RuntimeGo}); c != 2*time.Second {
		t.Errorf("Go capacity %v, want 2s", c)
	}
	if c := threadCapacity(app.CPU{Span: time.Second, ThreadTime: 6 * time.Second, CPUs: 2}, &app.Runtime{Name: app.RuntimeGo, Parallelism: 1}); c != time.Second {
		t.Errorf("GOMAXPROCS=1 capacity %v, want 1s", c)
	}
}
