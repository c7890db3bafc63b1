package load

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Worker is one worker's part of a merged result: its share, what it
// sent, its own cost and whether it limited the load.
type Worker struct {
	Segment  Segment   `json:"segment"`
	Start    time.Time `json:"start"`
	Elapsed  float64   `json:"duration_s"`
	Requests uint64    `json:"requests"`
	Errors   uint64    `json:"errors"`
	RPS      float64   `json:"rps"`
	// Rate is the worker's share of the open-loop rate; Sent the share
	// of it that went out (responses and errors per second over it).
	Rate       float64   `json:"target_rate,omitempty"`
	Sent       float64   `json:"sent_share,omitempty"`
	CPUSeconds float64   `json:"cpu_seconds"`
	ThreadBusy []float64 `json:"thread_busy"`
	// Saturated: this worker, not the server, limited its share of the
	// load (its own judgement, or its share did not go out while the
	// others' did).
	Saturated   bool     `json:"saturated"`
	SaturatedBy []string `json:"saturated_by,omitempty"`
}

// ErrMerge marks results that do not make one load together.
var ErrMerge = errors.New("cannot merge")

// shortfall is how far below its share of the open-loop rate a worker
// may send before it is named: under 95 % of it, and under 90 % of what
// the best other worker sent of its own (the server took more from
// them, so it was not the server that held this one back).
const (
	shortOwn    = 0.95
	shortOthers = 0.9
)

// Merge makes one result of the workers' results of one distributed
// load: every segment 1..N present once, with the same N, target and
// method. Its latencies are the merged histograms' (what one process
// would have recorded), its counts the sums, its timeline the workers'
// seconds summed by wall-clock second, and each worker is in Workers,
// named in SaturatedBy when it limited the load.
func Merge(rs []*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("%w: no results", ErrMerge)
	}
	n := 0
	seen := map[int]bool{}
	for i, r := range rs {
		switch {
		case r.Segment == nil:
			return nil, fmt.Errorf("%w: result %d is not a worker's (no segment: run load with --segment i/N)", ErrMerge, i+1)
		case r.Histogram == nil:
			return nil, fmt.Errorf("%w: worker %s's result has no latency histogram (written by load --json)", ErrMerge, r.Segment)
		case i == 0:
			n = r.Segment.Count
		case r.Segment.Count != n:
			return nil, fmt.Errorf("%w: worker %s is one of %d, worker %s of %d", ErrMerge, rs[0].Segment, n, r.Segment, r.Segment.Count)
		case r.URL != rs[0].URL || r.Method != rs[0].Method || r.KeepAlive != rs[0].KeepAlive:
			return nil, fmt.Errorf("%w: worker %s loaded %s %s, worker %s %s %s", ErrMerge, r.Segment, r.Method, r.URL, rs[0].Segment, rs[0].Method, rs[0].URL)
		}
		if seen[r.Segment.Index] {
			return nil, fmt.Errorf("%w: worker %s given twice", ErrMerge, r.Segment)
		}
		seen[r.Segment.Index] = true
	}
	if len(rs) != n {
		var missing []string
		for i := 1; i <= n && len(missing) < 10; i++ {
			if !seen[i] {
				missing = append(missing, strconv.Itoa(i))
			}
		}
		return nil, fmt.Errorf("%w: %d of %d workers' results given; missing segment %v of %d", ErrMerge, len(rs), n, missing, n)
	}
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b *Result) int { return a.Segment.Index - b.Segment.Index })

	first := rs[0]
	m := &Result{URL: clean(first.URL), Method: clean(first.Method), KeepAlive: first.KeepAlive,
		Status: map[string]uint64{}, ErrorCauses: map[string]uint64{}}
	run := hdrhistogram.New(histMin, histMax, histSig)
	all := hdrhistogram.New(histMin, histMax, histSig)
	t0, end := first.Start, first.Start.Add(first.Elapsed)
	for _, r := range rs {
		if r.Start.Before(t0) {
			t0 = r.Start
		}
		if e := r.Start.Add(r.Elapsed); e.After(end) {
			end = e
		}
	}
	for _, r := range rs {
		h, err := r.Histogram.Histogram()
		if err != nil {
			return nil, fmt.Errorf("%w: worker %s: %v", ErrMerge, r.Segment, err)
		}
		run.Merge(h)
		if r.HistogramAll != nil {
			ha, err := r.HistogramAll.Histogram()
			if err != nil {
				return nil, fmt.Errorf("%w: worker %s: %v", ErrMerge, r.Segment, err)
			}
			all.Merge(ha)
		}
		m.Connections += r.Connections
		m.Threads += r.Threads
		m.Rate += r.Rate
		m.Requests += r.Requests
		m.Bytes += r.Bytes
		m.Errors.add(r.Errors)
		m.Queued += r.Queued
		m.Unsent += r.Unsent
		m.ConnectionsOpened += r.ConnectionsOpened
		m.Interrupted = m.Interrupted || r.Interrupted
		for k, v := range r.Status {
			m.Status[k] += v
		}
		for k, v := range r.ErrorCauses {
			m.ErrorCauses[clean(k)] += v
		}
		for _, note := range r.Notes {
			m.Notes = append(m.Notes, "worker "+r.Segment.String()+": "+clean(note))
		}
		m.Self.CPUSeconds += r.Self.CPUSeconds
		m.Self.ThreadBusy = append(m.Self.ThreadBusy, r.Self.ThreadBusy...)
	}
	m.Start = t0
	m.Elapsed = end.Sub(t0)
	m.DurationS = m.Elapsed.Seconds()
	if s := m.DurationS; s > 0 {
		m.RPS = float64(m.Requests) / s
		m.BytesPerSec = float64(m.Bytes) / s
	}
	if m.Requests > 0 {
		m.Self.CPUPerRequest = time.Duration(m.Self.CPUSeconds / float64(m.Requests) * 1e9)
	}
	m.hist, m.histAll = run, all
	m.Latency = latencyOf(run)
	if all.TotalCount() > 0 {
		la := latencyOf(all)
		m.LatencyAll = &la
	}
	m.LatencySpread = spreadOf(run)
	for _, p := range []float64{50, 75, 90, 99, 99.9, 99.99, 100} {
		m.Percentiles = append(m.Percentiles, Percentile{p, us(run.ValueAtPercentile(p))})
	}
	tl, err := mergeTimelines(rs, t0)
	if err != nil {
		return nil, err
	}
	m.Timeline = tl
	if m.Measured, err = mergeMeasured(rs); err != nil {
		return nil, err
	}
	m.Workers = workers(rs)
	for _, w := range m.Workers {
		for _, why := range w.SaturatedBy {
			m.Saturated = true
			m.SaturatedBy = append(m.SaturatedBy, "worker "+w.Segment.String()+": "+why)
		}
	}
	m.KeepHistograms()
	return m, nil
}

// mergeMeasured merges the workers' measured windows (Options.Measure,
// the same for each): counts summed, every request's latency from the
// merged histograms, over the longest worker's window. Nil unless every
// worker has one. Its Latency (the responses' alone) stays zero: a
// worker's window carries every request's histogram, not theirs.
func mergeMeasured(rs []*Result) (*Window, error) {
	m := &Window{Status: map[string]uint64{}}
	all := hdrhistogram.New(histMin, histMax, histSig)
	for _, r := range rs {
		w := r.Measured
		if w == nil {
			return nil, nil
		}
		if w.Requests+w.Errors.Total() > 0 || w.HistogramAll != nil {
			h, err := w.HistogramAll.Histogram()
			if err != nil {
				return nil, fmt.Errorf("%w: worker %s's measured part: %v", ErrMerge, r.Segment, err)
			}
			all.Merge(h)
		}
		m.From = max(m.From, w.From)
		m.Seconds = max(m.Seconds, w.Seconds)
		m.Requests += w.Requests
		m.Errors.add(w.Errors)
		m.Unsent += w.Unsent
		for k, v := range w.Status {
			m.Status[k] += v
		}
	}
	m.all = all
	m.LatencyAll = latencyOf(all)
	return m, nil
}

// mergeTimelines sums the workers' seconds that began in the same
// wall-clock second since t0 (the workers start within milliseconds of
// each other, at --start-at). Each second's percentiles come from the
// workers' histograms of it; where one lacks it, they are the highest
// of the workers'.
func mergeTimelines(rs []*Result, t0 time.Time) ([]Second, error) {
	type acc struct {
		s     Second
		h     *hdrhistogram.Histogram
		exact bool
	}
	secs := map[int]*acc{}
	for _, r := range rs {
		for _, s := range r.Timeline {
			i := int((s.Start.Sub(t0) + time.Second/2) / time.Second)
			if i < 0 || i > 1e6 {
				return nil, fmt.Errorf("%w: worker %s's second %d starts %s from the first worker's start", ErrMerge, r.Segment, s.Index, s.Start.Sub(t0))
			}
			a := secs[i]
			if a == nil {
				a = &acc{s: Second{Index: i, Start: t0.Add(time.Duration(i) * time.Second)}, h: hdrhistogram.New(histMin, histMax, secSig), exact: true}
				secs[i] = a
			}
			a.s.Length = max(a.s.Length, s.Length)
			a.s.Requests += s.Requests
			a.s.Bytes += s.Bytes
			a.s.Errors.add(s.Errors)
			for k, v := range s.Status {
				a.s.Status[k] += v
			}
			a.s.OpenConns += s.OpenConns
			a.s.P50, a.s.P99 = max(a.s.P50, s.P50), max(a.s.P99, s.P99)
			if s.Histogram == nil {
				a.exact = false
				continue
			}
			h, err := s.Histogram.Histogram()
			if err != nil {
				return nil, fmt.Errorf("%w: worker %s, second %d: %v", ErrMerge, r.Segment, s.Index, err)
			}
			a.h.Merge(h)
		}
	}
	out := make([]Second, 0, len(secs))
	for _, i := range slices.Sorted(maps.Keys(secs)) {
		a := secs[i]
		if a.exact && a.h.TotalCount() > 0 {
			a.s.P50, a.s.P99 = us(a.h.ValueAtPercentile(50)), us(a.h.ValueAtPercentile(99))
		}
		out = append(out, a.s)
	}
	return out, nil
}

// workers sums up each worker and judges whether it limited the load:
// its own judgement (Result.Saturated), or, open-loop, a share of the
// rate that did not go out while the other workers sent theirs.
func workers(rs []*Result) []Worker {
	out := make([]Worker, len(rs))
	for i, r := range rs {
		w := Worker{Segment: *r.Segment, Start: r.Start, Elapsed: r.DurationS, Requests: r.Requests, Errors: r.Errors.Total(),
			RPS: r.RPS, Rate: r.Rate, CPUSeconds: r.Self.CPUSeconds, ThreadBusy: r.Self.ThreadBusy,
			Saturated: r.Saturated}
		for _, why := range r.SaturatedBy {
			w.SaturatedBy = append(w.SaturatedBy, clean(why))
		}
		if r.Rate > 0 && r.DurationS > 0 {
			w.Sent = (float64(r.Requests+r.Errors.Total()) / r.DurationS) / r.Rate
		}
		out[i] = w
	}
	for i := range out {
		w := &out[i]
		if w.Rate <= 0 || w.Elapsed <= 2 || w.Sent >= shortOwn {
			continue
		}
		best := 0.0
		for j, o := range out {
			if j != i {
				best = max(best, o.Sent)
			}
		}
		if len(out) > 1 && w.Sent < shortOthers*best {
			w.Saturated = true
			w.SaturatedBy = append(w.SaturatedBy, fmt.Sprintf("sent %.0f%% of its %.0f req/s while another worker sent %.0f%% of its own: its share of the load did not go out (its CPU: %.1f s over %.1f s)",
				100*w.Sent, w.Rate, 100*best, w.CPUSeconds, w.Elapsed))
		}
	}
	return out
}

// clean drops control bytes from text another host's result carries,
// which the merged report prints.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return -1
		}
		return r
	}, s)
}
