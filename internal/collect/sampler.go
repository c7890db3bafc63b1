package collect

import (
	"context"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Sample takes a snapshot now and then one every interval, aligned to the
// first, until ctx ends or count snapshots were taken (count <= 0: no
// limit). fn receives each snapshot as it is taken, on the caller's
// goroutine. A snapshot that takes longer than interval delays the next
// one instead of piling up.
func (s *Snapshotter) Sample(ctx context.Context, interval time.Duration, count int, fn func(evidence.Snapshot)) {
	start := time.Now()
	for i := 0; count <= 0 || i < count; i++ {
		if i > 0 {
			next := start.Add(time.Duration(i) * interval)
			t := time.NewTimer(time.Until(next))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		fn(s.Snapshot(ctx))
		if ctx.Err() != nil {
			return
		}
	}
}

// Bundle collects count snapshots at interval into a bundle. A cancelled
// context ends it early with the snapshots taken so far.
func (s *Snapshotter) Bundle(ctx context.Context, interval time.Duration, count int) *evidence.Bundle {
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: s.Host, Start: time.Now()}
	s.Sample(ctx, interval, count, func(snap evidence.Snapshot) {
		b.Snapshots = append(b.Snapshots, snap)
	})
	return b
}
