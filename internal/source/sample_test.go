package source

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// slow is a source whose snapshots take 20 ms (a slow snapshot is what
// the test is about) and remember when each one began and ended.
type slow struct {
	mu     sync.Mutex
	ends   map[time.Time]time.Time
	starts []time.Time
}

func (s *slow) Host() evidence.Host { return evidence.Host{Hostname: "test"} }

func (s *slow) Snapshot(context.Context) evidence.Snapshot {
	start := time.Now()
	s.mu.Lock()
	s.starts = append(s.starts, start)
	s.mu.Unlock()
	time.Sleep(20 * time.Millisecond) // the slow snapshot under test
	s.mu.Lock()
	s.ends[start] = time.Now()
	s.mu.Unlock()
	return evidence.Snapshot{Time: start}
}

func (s *slow) Discover(context.Context, int) Apps { return nil }
func (s *slow) Stream() Streamer                   { return nil }
func (s *slow) Close() error                       { return nil }

// begun is how many snapshots began, and whether the last one is still
// being taken.
func (s *slow) begun() (n int, inFlight bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = len(s.starts)
	if n > 0 {
		_, done := s.ends[s.starts[n-1]]
		inFlight = !done
	}
	return n, inFlight
}

// samplerHeld reports whether a Recorder's sampler is blocked taking its
// next snapshot: it came round while a mark holds its source.
func samplerHeld() bool { return poll.Goroutines("source.serialized.Snapshot", "(*Mutex).Lock") > 0 }

// TestMark: between a mark and resume no snapshot begins, and every
// snapshot that began before the mark has ended: a load started in that
// gap is seen by no snapshot of the quiet time before it. Snapshots stay
// in time order.
func TestMark(t *testing.T) {
	src := &slow{ends: map[time.Time]time.Time{}}
	r := Record(context.Background(), src, nil, 5*time.Millisecond)
	// The mark falls in the middle of the third snapshot.
	poll.True(t, time.Minute, "a third snapshot under way", func() bool { n, busy := src.begun(); return n >= 3 && busy })
	resume := Mark(context.Background(), r)
	gapStart := time.Now()
	// The gap, until the sampler came round for its next snapshot and
	// waits for the mark: no snapshot may begin in it.
	poll.True(t, time.Minute, "the sampler waiting for the mark", samplerHeld)
	gapEnd := time.Now()
	resume()
	poll.True(t, time.Minute, "a snapshot after resume: sampling goes on", func() bool {
		src.mu.Lock()
		defer src.mu.Unlock()
		return src.starts[len(src.starts)-1].After(gapEnd)
	})
	Stop(r)
	b := r.Bundle()
	if len(b.Snapshots) < 5 {
		t.Fatalf("%d snapshots, want 3 before the mark, the mark's, and more after", len(b.Snapshots))
	}
	for i, s := range b.Snapshots {
		if i > 0 && s.Time.Before(b.Snapshots[i-1].Time) {
			t.Errorf("snapshot %d out of order", i)
		}
		end := src.ends[s.Time]
		switch {
		case s.Time.After(gapStart) && s.Time.Before(gapEnd):
			t.Errorf("a snapshot began at +%v, between the mark and resume", s.Time.Sub(gapStart))
		case s.Time.Before(gapStart) && end.After(gapStart):
			t.Errorf("a snapshot begun before the mark ended %v after it", end.Sub(gapStart))
		}
	}
}
