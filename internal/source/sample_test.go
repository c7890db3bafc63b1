package source

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// slow is a source whose snapshots take 20 ms and remember when each one
// ended.
type slow struct {
	mu   sync.Mutex
	ends map[time.Time]time.Time
}

func (s *slow) Host() evidence.Host { return evidence.Host{Hostname: "test"} }

func (s *slow) Snapshot(context.Context) evidence.Snapshot {
	start := time.Now()
	time.Sleep(20 * time.Millisecond)
	s.mu.Lock()
	s.ends[start] = time.Now()
	s.mu.Unlock()
	return evidence.Snapshot{Time: start}
}

func (s *slow) Discover(context.Context, int) Apps { return nil }
func (s *slow) Stream() Streamer                   { return nil }
func (s *slow) Close() error                       { return nil }

// TestMark: between a mark and resume no snapshot begins, and every
// snapshot that began before the mark has ended: a load started in that
// gap is seen by no snapshot of the quiet time before it. Snapshots stay
// in time order.
func TestMark(t *testing.T) {
	src := &slow{ends: map[time.Time]time.Time{}}
	r := Record(context.Background(), src, nil, 5*time.Millisecond)
	time.Sleep(57 * time.Millisecond) // mid-snapshot, most likely
	resume := Mark(context.Background(), r)
	gapStart := time.Now()
	time.Sleep(60 * time.Millisecond)
	gapEnd := time.Now()
	resume()
	time.Sleep(40 * time.Millisecond)
	Stop(r)
	b := r.Bundle()
	if len(b.Snapshots) < 6 {
		t.Fatalf("%d snapshots", len(b.Snapshots))
	}
	after := 0
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
		case s.Time.After(gapEnd):
			after++
		}
	}
	if after == 0 {
		t.Error("no snapshot after resume: sampling did not go on")
	}
}
