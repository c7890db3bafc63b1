package app

import (
	"testing"
	"time"
)

func TestCPUSplit(t *testing.T) {
	s := time.Second
	for _, tt := range []struct {
		name               string
		c                  CPU
		throttled, waiting time.Duration
	}{
		{"no quota: every wait is for a CPU", CPU{RunDelay: 300 * time.Millisecond, IdleCPUs: 1.5}, 0, 300 * time.Millisecond},
		// The v1 capture: a spinning thread under 0.2 CPU on an idle
		// host waits 0.9 s a second, all of it for the quota.
		{"throttled while CPUs idle", CPU{RunDelay: 900 * time.Millisecond, Throttled: 10, ThrottledTime: 1600 * time.Millisecond, IdleCPUs: 1.6}, 900 * time.Millisecond, 0},
		{"throttled on busy CPUs", CPU{RunDelay: s, Throttled: 3, ThrottledTime: 200 * time.Millisecond, IdleCPUs: 0.1}, 200 * time.Millisecond, 800 * time.Millisecond},
		{"nothing waited", CPU{Throttled: 2, IdleCPUs: 0}, 0, 0},
		// Throttled 0.55 s a second on two busy CPUs while 2.4 threads
		// wanted them: 1.2 a CPU, each held by a throttled queue.
		{"several threads in a throttled queue", CPU{Span: s, CPUs: 2, OnCPU: 180 * time.Millisecond, RunDelay: 2250 * time.Millisecond, Throttled: 8, ThrottledTime: 550 * time.Millisecond},
			668250000, 2250*time.Millisecond - 668250000},
	} {
		th, w := tt.c.Split()
		if th != tt.throttled || w != tt.waiting {
			t.Errorf("%s: Split = %v, %v; want %v, %v", tt.name, th, w, tt.throttled, tt.waiting)
		}
	}
	c := CPU{ThreadTime: 4 * s, OnCPU: s, RunDelay: 500 * time.Millisecond}
	if c.OffCPU() != 2500*time.Millisecond {
		t.Errorf("OffCPU = %v", c.OffCPU())
	}
	if sum := c.Add(c); sum.ThreadTime != 8*s || sum.OnCPU != 2*s {
		t.Errorf("Add: %+v", sum)
	}
}

func TestGoQuotaAware(t *testing.T) {
	for v, want := range map[string]bool{"go1.24.2": false, "go1.25.0": true, "go1.26rc1": true, "go2.0": true, "devel": false} {
		if got := goQuotaAware(v); got != want {
			t.Errorf("%s: %v, want %v", v, got, want)
		}
	}
}
