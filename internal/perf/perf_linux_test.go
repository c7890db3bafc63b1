package perf

import (
	"os"
	"sync/atomic"
	"testing"
	"time"
)

// TestSampleSelf samples every CPU while this process spins, and finds
// its own samples with a user call chain.
func TestSampleSelf(t *testing.T) {
	s, err := Open(99, nil)
	if err != nil {
		if os.Geteuid() != 0 {
			t.Skip("needs root or CAP_PERFMON:", err)
		}
		t.Fatal(err)
	}
	defer s.Close()
	var stop atomic.Bool
	defer stop.Store(true)
	go func() {
		x := 1
		for !stop.Load() {
			x = x*31 + 7
		}
	}()
	own, withUser := 0, 0
	deadline := time.Now().Add(20 * time.Second)
	for own < 20 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		err := s.Read(func(smp *Sample) {
			if smp.PID == uint32(os.Getpid()) {
				own++
				if len(smp.User) > 0 {
					withUser++
				}
				if smp.Period == 0 {
					t.Errorf("sample without a period: %+v", smp)
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if own < 20 || withUser == 0 {
		t.Errorf("%d samples of this process, %d with a user chain", own, withUser)
	}
}
