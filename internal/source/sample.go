package source

import (
	"context"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/pace"
)

// Sample takes a snapshot now and then one every interval, on the
// lattice of a pace.Ticker aligned to the first, until ctx ends or count
// snapshots were taken (count <= 0: no limit). fn receives each snapshot
// as it is taken, on the caller's goroutine. A snapshot that takes
// longer than interval delays the next one instead of piling up.
func Sample(ctx context.Context, src Source, interval time.Duration, count int, fn func(evidence.Snapshot)) {
	ticks := pace.New(interval)
	for n := 0; count <= 0 || n < count; n++ {
		// The first snapshot is taken whatever ctx says: a window cut
		// short at once is still a snapshot of evidence.
		if _, ok := ticks.Next(ctx); !ok && n > 0 {
			return
		}
		fn(src.Snapshot(ctx))
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

	// For a Streamer: the mark's snapshot and when sampling resumed
	// after it; kernel log lines of snapshots dropped in between, for
	// the next one kept.
	markAt, resumeAt time.Time
	carry            []evidence.KernelMsg
	// lost is why the source stopped answering, and lostAt the last
	// time it did; nil when it answered to the end.
	lost   error
	lostAt time.Time
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
		if st := src.Stream(); st != nil {
			r.follow(ctx, st, interval)
			return
		}
		Sample(ctx, serialized{src, &r.busy}, interval, 0, r.add)
		// The last snapshot is taken when sampling stops: the end of
		// the window is evidence too.
		r.add(serialized{src, &r.busy}.Snapshot(context.Background()))
	}()
	if apps != nil {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			// The servers' workers are sampled on a lattice of their
			// own: a server whose status page hangs must not delay the
			// kernel's evidence.
			for range pace.Every(ctx, interval) {
				apps.Sample(ctx)
			}
		}()
	}
	return r
}

// add keeps a snapshot, in time order.
func (r *Recorder) add(s evidence.Snapshot) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addLocked(s)
}

func (r *Recorder) addLocked(s evidence.Snapshot) {
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
			st := r.src.Stream()
			if st == nil {
				r.add(r.src.Snapshot(ctx))
				return
			}
			s, err := st.Take(ctx)
			r.mu.Lock()
			defer r.mu.Unlock()
			if err != nil {
				r.failed(err)
				return
			}
			r.addLocked(s)
			r.markAt = s.Time
		}()
	}
	wg.Wait()
	return func() {
		now := time.Now()
		for _, r := range rs {
			r.mu.Lock()
			r.resumeAt = now
			r.mu.Unlock()
			r.busy.Unlock()
		}
	}
}

// follow records a Streamer's own snapshots until ctx ends, then takes
// the last one. An agent that stops answering is asked again every half
// second: its window still holds what it took meanwhile, so a network
// blip loses nothing; one that never answers again ends the evidence
// where it stopped (Lost).
func (r *Recorder) follow(ctx context.Context, st Streamer, interval time.Duration) {
	last := r.bundle.Start
	for ctx.Err() == nil {
		ss, err := st.Next(ctx, last, 5*time.Second)
		for _, s := range ss {
			r.streamed(st, s)
			last = s.Time
		}
		if ctx.Err() != nil {
			break
		}
		if err != nil {
			r.mu.Lock()
			r.failed(err)
			r.mu.Unlock()
			pace.Sleep(ctx, min(interval, 500*time.Millisecond))
			continue
		}
		r.mu.Lock()
		r.lost = nil
		r.mu.Unlock()
	}
	// The end of the window: a snapshot taken now, and the ones taken
	// before it that did not arrive yet.
	r.mu.Lock()
	timeout := 10 * time.Second
	if r.lost != nil {
		timeout = 2 * time.Second
	}
	r.mu.Unlock()
	fctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := st.Take(fctx)
	if err != nil {
		r.mu.Lock()
		r.failed(err)
		r.mu.Unlock()
		return
	}
	ss, _ := st.Next(fctx, last, 0)
	for _, x := range ss {
		r.streamed(st, x)
	}
	r.streamed(st, s)
	r.mu.Lock()
	r.lost = nil
	r.mu.Unlock()
}

// streamed keeps a snapshot the source took by itself, unless it is one
// already kept (the mark's, the last) or one that began between the mark
// and the resume: it may have read the counters as the load began, and
// would credit the load's first drops to the quiet time before it (what
// Mark prevents for the sources it samples itself). Its kernel log lines
// go to the next snapshot kept.
func (r *Recorder) streamed(st Streamer, s evidence.Snapshot) {
	r.busy.Lock()
	defer r.busy.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	ss := r.bundle.Snapshots
	for i := len(ss) - 1; i >= 0 && !ss[i].Time.Before(s.Time); i-- {
		if ss[i].Time.Equal(s.Time) {
			return
		}
	}
	_, slack := st.Clock()
	if !r.markAt.IsZero() && s.Time.After(r.markAt) && s.Time.Before(r.resumeAt.Add(slack)) {
		r.carry = append(r.carry, s.Kmsg...)
		return
	}
	if len(r.carry) > 0 {
		s.Kmsg = append(r.carry, s.Kmsg...)
		r.carry = nil
	}
	r.addLocked(s)
}

// failed notes that the source did not answer. r.mu is held.
func (r *Recorder) failed(err error) {
	if r.lost == nil {
		r.lostAt = time.Now()
		if n := len(r.bundle.Snapshots); n > 0 {
			r.lostAt = r.bundle.Snapshots[n-1].Time
		}
	}
	r.lost = err
}

// Lost says why the source stopped answering before the recording
// ended, and the time of the last snapshot it gave; nil when it answered
// to the end.
func (r *Recorder) Lost() (time.Time, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lostAt, r.lost
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
