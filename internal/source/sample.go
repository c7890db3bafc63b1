package source

import (
	"context"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Sample takes a snapshot now and then one every interval, aligned to the
// first, until ctx ends or count snapshots were taken (count <= 0: no
// limit). fn receives each snapshot as it is taken, on the caller's
// goroutine. A snapshot that takes longer than interval delays the next
// one instead of piling up.
func Sample(ctx context.Context, src Source, interval time.Duration, count int, fn func(evidence.Snapshot)) {
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
		fn(src.Snapshot(ctx))
		if ctx.Err() != nil {
			return
		}
	}
}

// Bundle collects count snapshots at interval into a bundle. A cancelled
// context ends it early with the snapshots taken so far.
func Bundle(ctx context.Context, src Source, interval time.Duration, count int) *evidence.Bundle {
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: src.Host(), Start: time.Now()}
	Sample(ctx, src, interval, count, func(snap evidence.Snapshot) {
		b.Snapshots = append(b.Snapshots, snap)
	})
	return b
}

// Recorder samples a source, and the applications behind a port, every
// interval in the background until stopped.
type Recorder struct {
	src Source
	// busy is held while a snapshot is taken, and by Mark until the
	// caller resumes: no snapshot is in flight across a mark.
	busy   sync.Mutex
	mu     sync.Mutex
	bundle *evidence.Bundle
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// Record starts sampling src (and apps, when not nil) every interval.
// It keeps going when ctx is cancelled (a run interrupted by Ctrl-C still
// reports); Stop ends it.
func Record(ctx context.Context, src Source, apps Apps, interval time.Duration) *Recorder {
	ctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	r := &Recorder{src: src, stop: stop, bundle: &evidence.Bundle{Version: evidence.BundleVersion, Host: src.Host(), Start: time.Now()}}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		Sample(ctx, serialized{src, &r.busy}, interval, 0, r.add)
		// The last snapshot is taken when sampling stops: the end of
		// the window is evidence too.
		r.add(serialized{src, &r.busy}.Snapshot(context.Background()))
	}()
	if apps != nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			t := time.NewTicker(interval)
			defer t.Stop()
			for {
				apps.Sample(ctx)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	return r
}

// add keeps a snapshot, in time order.
func (r *Recorder) add(s evidence.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ss := append(r.bundle.Snapshots, s)
	for i := len(ss) - 1; i > 0 && ss[i].Time.Before(ss[i-1].Time); i-- {
		ss[i], ss[i-1] = ss[i-1], ss[i]
	}
	r.bundle.Snapshots = ss
}

// Mark takes a snapshot of each recorder's source now, all at once, and
// holds every other snapshot until resume is called. A run marks the end
// of its quiet baseline this way, notes the time and starts the load,
// then resumes: a periodic snapshot due at that moment would otherwise
// still be reading counters when the first connections arrive, and
// credit the load's drops to the quiet time before it. Every snapshot
// taken before the mark completed before it; every later one begins
// after resume.
func Mark(ctx context.Context, rs ...*Recorder) (resume func()) {
	var wg sync.WaitGroup
	for _, r := range rs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.busy.Lock()
			r.add(r.src.Snapshot(ctx))
		}()
	}
	wg.Wait()
	return func() {
		for _, r := range rs {
			r.busy.Unlock()
		}
	}
}

// serialized takes one snapshot at a time.
type serialized struct {
	Source
	mu *sync.Mutex
}

func (s serialized) Snapshot(ctx context.Context) evidence.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Source.Snapshot(ctx)
}

// Stop ends the recorders at once, so that their last snapshots are
// taken together, and waits for them.
func Stop(rs ...*Recorder) {
	for _, r := range rs {
		r.stop()
	}
	for _, r := range rs {
		r.wg.Wait()
	}
}

// Bundle is what the recorder took; complete once stopped.
func (r *Recorder) Bundle() *evidence.Bundle {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bundle
}
