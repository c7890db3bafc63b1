package perf

import (
	"github.com/netdoctor/netdoctor/internal/poll"
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
	// Read every 50 ms: the ring fills between two reads.
	poll.WaitEvery(20*time.Second, 50*time.Millisecond, func() bool {
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
		return own >= 20
	})
	if own < 20 || withUser == 0 {
		t.Errorf("%d samples of this process, %d with a user chain", own, withUser)
	}
}
