package load

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// rateInterval is how often wrk samples each thread's request rate
// (RECORD_INTERVAL_MS in wrk's src/wrk.c).
const rateInterval = 100 * time.Millisecond

// rateSampler records what wrk reports as Req/Sec. wrk's threads each
// run a timer every 100 ms that, when the thread completed responses
// since its last sample, records their number divided by the time since
// that sample, as a rate per second; a thread with nothing new records
// nothing and its next sample spans the quiet time. Req/Sec's Avg is
// thus about Requests/sec divided by the threads, and its Stdev and Max
// show how unevenly a thread's 100 ms went. The sampler does the same
// from outside the event loops, reading each thread's response count,
// and stops when the duration ends: responses drained after it are in
// the totals, not in Req/Sec, as wrk stops its loops there.
type rateSampler struct {
	threads []*threadStats
	hist    *hdrhistogram.Histogram
	last    []uint64
	since   []time.Time
}

func newRateSampler(threads []*threadStats, start time.Time) *rateSampler {
	r := &rateSampler{threads: threads, hist: hdrhistogram.New(1, 1e9, 3),
		last: make([]uint64, len(threads)), since: make([]time.Time, len(threads))}
	for i := range r.since {
		r.since[i] = start
	}
	return r
}

// loop samples every rateInterval until stopped is closed, then takes a
// last sample of the partial interval.
func (r *rateSampler) loop(stopped <-chan struct{}) {
	t := time.NewTicker(rateInterval)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			r.sample(now, false)
		case <-stopped:
			r.sample(time.Now(), true)
			return
		}
	}
}

// sample records each thread's rate since its last sample. The last,
// partial interval counts only when it is at least half an interval
// long, or when there is no sample at all (a run shorter than 100 ms):
// a rate over a few milliseconds would be noise.
func (r *rateSampler) sample(now time.Time, final bool) {
	for i, t := range r.threads {
		t.mu.Lock()
		n := t.total.requests
		t.mu.Unlock()
		d := n - r.last[i]
		el := now.Sub(r.since[i])
		if d == 0 || el <= 0 || (final && el < rateInterval/2 && r.hist.TotalCount() > 0) {
			continue
		}
		r.hist.RecordValue(int64(float64(d) / el.Seconds()))
		r.last[i], r.since[i] = n, now
	}
}

// spreadOf sums up a histogram as a row of wrk's table: its mean,
// standard deviation and maximum, and the share of samples within one
// standard deviation of the mean.
func spreadOf(h *hdrhistogram.Histogram) Spread {
	n := h.TotalCount()
	if n == 0 {
		return Spread{}
	}
	s := Spread{Samples: n, Mean: h.Mean(), Stdev: h.StdDev(), Max: float64(h.Max())}
	lo, hi := s.Mean-s.Stdev, s.Mean+s.Stdev
	var in int64
	for _, b := range h.Distribution() {
		if v := float64(b.From+b.To) / 2; b.Count > 0 && v >= lo && v <= hi {
			in += b.Count
		}
	}
	s.WithinStdev = 100 * float64(in) / float64(n)
	return s
}
