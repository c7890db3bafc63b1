package load

import (
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds, from 1 µs to an hour.
const (
	histMin  = 1
	histMax  = int64(time.Hour / time.Microsecond)
	histSig  = 3 // whole run: 0.1% precision
	secSig   = 2 // per second: 1%, a twentieth of the memory
	stNone   = 0
	errConn  = 1
	errRead  = 2
	errWrite = 3
	errTime  = 4
)

// secStats is one thread's share of one second.
type secStats struct {
	requests, bytes uint64
	errors          Errors
	status          [6]uint64
	hist            *hdrhistogram.Histogram
	unsent          uint64 // (totals only) open-loop requests never sent
}

func newSecStats() *secStats {
	return &secStats{hist: hdrhistogram.New(histMin, histMax, secSig)}
}

func (s *secStats) reset() {
	h := s.hist
	h.Reset()
	*s = secStats{hist: h}
}

// threadStats is what one event-loop thread (or, for HTTPS, a group of
// connection goroutines) records. The aggregator swaps cur for a fresh
// one each second under mu; everything else is also guarded by mu, which
// is uncontended on the event-loop path.
type threadStats struct {
	mu    sync.Mutex
	cur   *secStats
	spare *secStats
	// run holds the responses' latencies; all every request's, answered
	// or failed, each at the time it ended (Result.LatencyAll).
	run, all *hdrhistogram.Histogram
	total    secStats
	causes   map[string]uint64
	opened   uint64
	open     atomic.Int64 // connections open now
	// queued counts open-loop requests that found every connection busy
	// when due and waited in the generator for one.
	queued uint64
	// from is where the measured part begins (Options.Measure), since
	// the start; measured counts what ended from then on, its latencies
	// in mrun and mall. from < 0: no measured part.
	from       time.Duration
	measured   secStats
	mrun, mall *hdrhistogram.Histogram
	// raw, when not nil, keeps every response's latency in µs
	// (Options.RawLatencies).
	raw []int64
}

func newThreadStats(from time.Duration) *threadStats {
	t := &threadStats{cur: newSecStats(), spare: newSecStats(),
		run: hdrhistogram.New(histMin, histMax, histSig), all: hdrhistogram.New(histMin, histMax, histSig),
		causes: map[string]uint64{}, from: from}
	if from >= 0 {
		t.mrun, t.mall = hdrhistogram.New(histMin, histMax, histSig), hdrhistogram.New(histMin, histMax, histSig)
	}
	return t
}

func micros(d time.Duration) int64 {
	us := int64(d / time.Microsecond)
	if us < histMin {
		return histMin
	}
	if us > histMax {
		return histMax
	}
	return us
}

// record counts one completed response of latency lat, ended at at
// (since the start).
func (t *threadStats) record(lat, at time.Duration, status int, bytes uint64) {
	us := micros(lat)
	class := status / 100
	if class < 1 || class > 5 {
		class = 0
	}
	t.mu.Lock()
	c := t.cur
	c.requests++
	c.bytes += bytes
	c.status[class]++
	c.hist.RecordValue(us)
	t.total.requests++
	t.total.bytes += bytes
	t.total.status[class]++
	t.run.RecordValue(us)
	t.all.RecordValue(us)
	if t.raw != nil {
		t.raw = append(t.raw, us)
	}
	if t.from >= 0 && at >= t.from {
		m := &t.measured
		m.requests++
		m.bytes += bytes
		m.status[class]++
		t.mrun.RecordValue(us)
		t.mall.RecordValue(us)
	}
	t.mu.Unlock()
}

// count counts one response without its latency: one of a script's
// pipelined responses before the last.
func (t *threadStats) count(status int, bytes uint64) {
	class := status / 100
	if class < 1 || class > 5 {
		class = 0
	}
	t.mu.Lock()
	t.cur.requests++
	t.cur.bytes += bytes
	t.cur.status[class]++
	t.total.requests++
	t.total.bytes += bytes
	t.total.status[class]++
	t.mu.Unlock()
}

// fail counts one failed request in class with its cause. lat is how
// long the request took until it failed, from its origin (its intended
// send time in open loop), and at when it failed, since the start; a
// negative lat is a failure that was no request's (the thread's own
// epoll), counted without a latency.
func (t *threadStats) fail(class int, cause string, lat, at time.Duration) {
	t.mu.Lock()
	errs := []*Errors{&t.cur.errors, &t.total.errors}
	measured := t.from >= 0 && at >= t.from
	if measured {
		errs = append(errs, &t.measured.errors)
	}
	for _, e := range errs {
		switch class {
		case errConn:
			e.Connect++
		case errRead:
			e.Read++
		case errWrite:
			e.Write++
		case errTime:
			e.Timeout++
		}
	}
	t.causes[cause]++
	if lat >= 0 {
		us := micros(lat)
		t.all.RecordValue(us)
		if measured {
			t.mall.RecordValue(us)
		}
	}
	t.mu.Unlock()
}

// unsent counts an open-loop request that was due at origin and still
// waiting for a connection when the run ended at end: it is in the
// latencies of every request at its age then, a lower bound.
func (t *threadStats) unsent(origin, end time.Duration) {
	us := micros(end - origin)
	t.mu.Lock()
	t.total.unsent++
	t.all.RecordValue(us)
	if t.from >= 0 && end >= t.from {
		t.measured.unsent++
		t.mall.RecordValue(us)
	}
	t.mu.Unlock()
}

// waited counts n open-loop requests that waited for a free connection.
func (t *threadStats) waited(n uint64) {
	t.mu.Lock()
	t.queued += n
	t.mu.Unlock()
}

func (t *threadStats) connected() {
	t.open.Add(1)
	t.mu.Lock()
	t.opened++
	t.mu.Unlock()
}

// swap hands the finished second to the aggregator.
func (t *threadStats) swap() *secStats {
	t.mu.Lock()
	done := t.cur
	t.spare.reset()
	t.cur, t.spare = t.spare, done
	t.mu.Unlock()
	return done
}
