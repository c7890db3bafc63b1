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
	mu     sync.Mutex
	cur    *secStats
	spare  *secStats
	run    *hdrhistogram.Histogram
	total  secStats
	causes map[string]uint64
	opened uint64
	open   atomic.Int64 // connections open now
}

func newThreadStats() *threadStats {
	return &threadStats{cur: newSecStats(), spare: newSecStats(),
		run: hdrhistogram.New(histMin, histMax, histSig), causes: map[string]uint64{}}
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

// record counts one completed response.
func (t *threadStats) record(lat time.Duration, status int, bytes uint64) {
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

// fail counts one failed request in class with its cause.
func (t *threadStats) fail(class int, cause string) {
	t.mu.Lock()
	for _, e := range []*Errors{&t.cur.errors, &t.total.errors} {
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
