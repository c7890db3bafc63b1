package app

import (
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// BenchmarkWaits measures one per-second sample of 64 blocked workers'
// wait channels, next to what an engineer would run for the same picture,
// `ps -L -o stat=,wchan= -p PIDS`, in the same benchmark run:
//
//	go test -run - -bench Waits -count 5 ./internal/app
func BenchmarkWaits(b *testing.B) {
	var pids []string
	var ids []int
	for range 64 {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			b.Skip(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		ids = append(ids, cmd.Process.Pid)
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	// A sleep just started may still be in exec or the loader: measure
	// once all 64 sleep.
	poll.True(b, time.Minute, "all 64 sleeps asleep", func() bool { c, _ := Waits("/proc", ids, 80); return c[WaitSleep] == len(ids) })
	b.Run("netdoctor", func(b *testing.B) {
		for b.Loop() {
			if c, _ := Waits("/proc", ids, 80); c[WaitSleep] != len(ids) {
				b.Fatalf("classes %v", c)
			}
		}
	})
	b.Run("ps", func(b *testing.B) {
		if _, err := exec.LookPath("ps"); err != nil {
			b.Skip(err)
		}
		for b.Loop() {
			if err := exec.Command("ps", "-L", "-o", "stat=,wchan=", "-p", strings.Join(pids, ",")).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkAccountCPU measures one per-second CPU accounting of 64
// worker processes' threads (a schedstat read each, their affinity, the
// cgroup's cpu.stat and pressure), next to what an engineer would run
// for their CPU time and state, `ps -L -o pid,tid,time,stat -p PIDS`:
//
//	go test -run - -bench AccountCPU -count 5 ./internal/app
func BenchmarkAccountCPU(b *testing.B) {
	var pids []string
	var ids []int
	for range 64 {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			b.Skip(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		ids = append(ids, cmd.Process.Pid)
		pids = append(pids, strconv.Itoa(cmd.Process.Pid))
	}
	o := &Observer{proc: "/proc"}
	s := &Server{Kind: "sleep", PIDs: ids[:1]}
	b.Run("netdoctor", func(b *testing.B) {
		prev := o.readHostCPU(time.Now())
		for b.Loop() {
			now := time.Now()
			host := o.readHostCPU(now)
			o.accountCPU(s, ids, now, host, prev)
			prev = host
		}
	})
	b.Run("ps", func(b *testing.B) {
		if _, err := exec.LookPath("ps"); err != nil {
			b.Skip(err)
		}
		for b.Loop() {
			if err := exec.Command("ps", "-L", "-o", "pid=,tid=,time=,stat=", "-p", strings.Join(pids, ",")).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}
