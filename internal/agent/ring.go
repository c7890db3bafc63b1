package agent

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// ring is the agent's rolling window: every snapshot of the retention,
// stored as compressed JSON (a snapshot is ~16 KiB of JSON and ~40 KiB
// decoded, ~3 KiB compressed: fifteen minutes at 1 Hz stay under 4 MiB),
// and the most recent ones decoded, for the rules that run every second.
// It is bounded both by count and by bytes, whatever the host.
type ring struct {
	mu       sync.Mutex
	items    []stored
	bytes    int
	maxCount int
	maxBytes int
	recent   []evidence.Snapshot
	recentN  int
	// added is closed, and replaced, whenever a snapshot is added: it
	// wakes the requests waiting for one.
	added chan struct{}

	// zw and buf are reused by add, which only the sampler calls (one at
	// a time: the agent serializes its snapshots).
	zw  *flate.Writer
	buf bytes.Buffer
}

type stored struct {
	t time.Time
	z []byte
}

func newRing(maxCount, maxBytes, recentN int) *ring {
	zw, _ := flate.NewWriter(nil, flate.BestSpeed) // a valid level cannot fail
	return &ring{maxCount: max(maxCount, 1), maxBytes: maxBytes, recentN: max(recentN, 2), added: make(chan struct{}), zw: zw}
}

// add stores a snapshot. Snapshots arrive in time order (the agent takes
// one at a time); one older than the newest is refused, so that "since"
// queries never miss one.
func (r *ring) add(s evidence.Snapshot) error {
	r.buf.Reset()
	r.zw.Reset(&r.buf)
	if err := json.NewEncoder(r.zw).Encode(&s); err != nil {
		return fmt.Errorf("encode snapshot: %w", err)
	}
	if err := r.zw.Close(); err != nil {
		return fmt.Errorf("compress snapshot: %w", err)
	}
	z := bytes.Clone(r.buf.Bytes())

	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.items); n > 0 && !s.Time.After(r.items[n-1].t) {
		return fmt.Errorf("snapshot at %v is not after the last one (%v)", s.Time, r.items[n-1].t)
	}
	r.items = append(r.items, stored{t: s.Time, z: z})
	r.bytes += len(z)
	drop := 0
	for len(r.items)-drop > r.maxCount || (r.bytes > r.maxBytes && len(r.items)-drop > 1) {
		r.bytes -= len(r.items[drop].z)
		drop++
	}
	if drop > 0 {
		clear(r.items[:drop]) // let the dropped bytes go
		r.items = slices.Delete(r.items, 0, drop)
	}
	r.recent = append(r.recent, s)
	if len(r.recent) > r.recentN {
		r.recent = slices.Delete(r.recent, 0, len(r.recent)-r.recentN)
	}
	close(r.added)
	r.added = make(chan struct{})
	return nil
}

// Recent returns the decoded snapshots of the last n (at most recentN),
// oldest first. The slice is the caller's; the snapshots are shared and
// must not be changed.
func (r *ring) Recent() []evidence.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.recent)
}

// Len is how many snapshots the ring holds, Bytes their compressed size.
func (r *ring) Len() (n, bytes int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items), r.bytes
}

// Oldest and Newest are the times of the first and last snapshot held;
// zero when there is none.
func (r *ring) Span() (oldest, newest time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.items); n > 0 {
		return r.items[0].t, r.items[n-1].t
	}
	return time.Time{}, time.Time{}
}

// after returns up to limit stored snapshots taken strictly after t,
// whether more follow, whether some after t were already dropped, and a
// channel closed when the next snapshot is added.
func (r *ring) after(t time.Time, limit int) (out []stored, more, gap bool, added <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, _ := slices.BinarySearchFunc(r.items, t, func(s stored, t time.Time) int {
		if s.t.After(t) {
			return 1
		}
		return -1 // equal counts as before: strictly after t
	})
	if i == 0 && len(r.items) > 0 && !t.IsZero() && t.Before(r.items[0].t) {
		gap = true
	}
	end := min(len(r.items), i+limit)
	out = slices.Clone(r.items[i:end])
	return out, end < len(r.items), gap, r.added
}

// raw decompresses a stored snapshot to its JSON.
func (s stored) raw() ([]byte, error) {
	zr := flate.NewReader(bytes.NewReader(s.z))
	defer zr.Close()
	b, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("stored snapshot at %v: %w", s.t, err)
	}
	return bytes.TrimRight(b, "\n"), nil
}

// between decodes the snapshots taken from 'from' to 'to', both
// included: an incident's window.
func (r *ring) between(from, to time.Time) ([]evidence.Snapshot, error) {
	items, _, _, _ := r.after(from.Add(-1), r.maxCount)
	var out []evidence.Snapshot
	for _, it := range items {
		if it.t.After(to) {
			break
		}
		b, err := it.raw()
		if err != nil {
			return out, err
		}
		var s evidence.Snapshot
		if err := json.Unmarshal(b, &s); err != nil {
			return out, fmt.Errorf("stored snapshot at %v: %w", it.t, err)
		}
		out = append(out, s)
	}
	return out, nil
}
