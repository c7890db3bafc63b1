package load

import (
	"context"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// aggregator closes each second: it swaps every thread's current second
// out, merges them into one Second, and hands it to Options.OnSecond.
type aggregator struct {
	e        *engine
	hist     *hdrhistogram.Histogram
	timeline []Second
}

func newAggregator(e *engine) *aggregator {
	return &aggregator{e: e, hist: hdrhistogram.New(histMin, histMax, secSig)}
}

func (a *aggregator) loop(ctx context.Context) {
	for i := 1; ; i++ {
		t := time.NewTimer(time.Until(a.e.start.Add(time.Duration(i) * time.Second)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		a.close(time.Second)
	}
}

// flush closes the last, partial second when it holds anything.
func (a *aggregator) flush(elapsed time.Duration) {
	rest := elapsed - time.Duration(len(a.timeline))*time.Second
	if rest <= 0 {
		return
	}
	s := a.collect(rest)
	if s.Requests > 0 || s.Errors.Total() > 0 {
		a.publish(s)
	}
}

func (a *aggregator) close(length time.Duration) { a.publish(a.collect(length)) }

func (a *aggregator) collect(length time.Duration) Second {
	idx := len(a.timeline)
	s := Second{Index: idx, Start: a.e.start.Add(time.Duration(idx) * time.Second), Length: length}
	a.hist.Reset()
	for _, t := range a.e.threads {
		c := t.swap()
		s.Requests += c.requests
		s.Bytes += c.bytes
		s.Errors.add(c.errors)
		for k, v := range c.status {
			s.Status[k] += v
		}
		a.hist.Merge(c.hist)
		s.OpenConns += int(t.open.Load())
	}
	if a.hist.TotalCount() > 0 {
		s.P50 = us(a.hist.ValueAtPercentile(50))
		s.P99 = us(a.hist.ValueAtPercentile(99))
	}
	if a.e.opts.Segment != nil {
		s.Histogram = newHist(a.hist)
	}
	return s
}

func (a *aggregator) publish(s Second) {
	a.timeline = append(a.timeline, s)
	if a.e.opts.OnSecond != nil {
		a.e.opts.OnSecond(s)
	}
}
