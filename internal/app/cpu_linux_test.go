package app

import (
	"github.com/netdoctor/netdoctor/internal/poll"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestAccountCPU accounts this process's threads over two intervals
// while one of them spins: its time on CPU shows, and every thread's
// time is accounted for.
func TestAccountCPU(t *testing.T) {
	o := &Observer{proc: "/proc"}
	s := &Server{Kind: "test", PIDs: []int{os.Getpid()}}
	pids := []int{os.Getpid()}
	now := time.Now()
	if c := o.accountCPU(s, pids, now, o.readHostCPU(now), nil); c != nil {
		t.Fatalf("first sample accounted %+v, want only a starting point", c)
	}
	var stop atomic.Bool
	go func() {
		runtime.LockOSThread()
		x := 0
		for !stop.Load() {
			x++
		}
	}()
	// Intervals of 200 ms, as many as the spinning thread takes to be
	// seen on a CPU for 100 ms.
	var got CPU
	poll.WaitEvery(30*time.Second, 200*time.Millisecond, func() bool {
		prev := o.host
		o.host = o.readHostCPU(time.Now())
		if c := o.accountCPU(s, pids, time.Now(), o.host, prev); c != nil {
			got = got.Add(*c)
		}
		return got.OnCPU >= 100*time.Millisecond
	})
	stop.Store(true)
	if got.OnCPU < 100*time.Millisecond || got.Threads < 2 || got.ThreadTime < got.OnCPU+got.RunDelay {
		t.Errorf("accounted %+v: want the spinning thread's time on CPU, within the threads' time", got)
	}
	if got.CPUs != runtime.NumCPU() && got.CPUs == 0 {
		t.Errorf("CPUs %d", got.CPUs)
	}
	if s.CGroup == nil {
		t.Errorf("no cgroup resolved")
	}
	if rt, _ := runtimeOf("/proc", procInfo{pid: os.Getpid(), comm: "app.test"}, "app.test"); rt == nil || rt.Name != RuntimeGo || rt.Version != runtime.Version() {
		t.Errorf("runtime of this test: %+v, want go %s", rt, runtime.Version())
	}
}
