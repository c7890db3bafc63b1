package capacity

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// outcome is what one step measured after its warm-up: the requests that
// ended in it (answered, failed, never sent) and every request's latency
// at any percentile.
type outcome struct {
	seconds float64
	// answered: responses of any status; good: 2xx and 3xx; failed:
	// connect, read, write and timeout errors; unsent: never sent.
	answered, good, failed, unsent uint64
	queued, opened                 uint64
	percentile                     func(p float64) time.Duration
	// saturated says why the load generator may have limited the step.
	saturated []string
	collapsed bool
}

// ended counts the requests that ended in the measured part.
func (o outcome) ended() uint64 { return o.answered + o.failed + o.unsent }

// outcomeOf is a load's measured part as a step's outcome.
func outcomeOf(res *load.Result, collapsed bool) outcome {
	o := outcome{queued: res.Queued, opened: res.ConnectionsOpened, saturated: res.SaturatedBy, collapsed: collapsed,
		percentile: func(float64) time.Duration { return 0 }}
	if m := res.Measured; m != nil {
		o.seconds = m.Seconds
		o.answered, o.good, o.failed, o.unsent = m.Requests, m.Good(), m.Errors.Total(), m.Unsent
		o.percentile = m.Percentile
	}
	return o
}

// Percentiles every step reports besides the SLO's.
var stepPercentiles = []float64{50, 90, 99, 99.9}

// keepUp is the share of the offered rate a step's requests must end at
// (beyond a few requests of slack at the window's edges): fewer, and a
// queue grew somewhere, the generator's or the service's.
const keepUp = 0.95

// judge makes a step of an outcome at rate (0: the closed-loop probe)
// and says whether it met the SLO.
func judge(slo report.SLO, rate float64, o outcome) report.Step {
	s := report.Step{Rate: rate, Seconds: o.seconds, Opened: o.opened, Queued: o.queued, Unsent: o.unsent,
		Errors: o.failed + o.answered - o.good, Collapsed: o.collapsed, GeneratorLimited: o.saturated}
	n := o.ended()
	if o.seconds > 0 {
		s.Goodput = float64(o.good) / o.seconds
		s.Throughput = float64(n) / o.seconds
	}
	if n > 0 {
		s.SuccessShare = float64(o.good) / float64(n)
	}
	ps := slices.Clone(stepPercentiles)
	for _, ob := range slo.Objectives {
		if !slices.Contains(ps, ob.Percentile) {
			ps = append(ps, ob.Percentile)
		}
	}
	slices.Sort(ps)
	ps = append(ps, 100)
	if n > 0 {
		for _, p := range ps {
			s.Latency = append(s.Latency, report.Quantile{Percentile: p, Latency: o.percentile(p)})
		}
	}
	if n == 0 {
		s.Broke = append(s.Broke, "no request ended")
		return s
	}
	// Failed: errors and unsuccessful responses, of the requests that
	// were sent; those never sent are the queue's (below).
	if sent := o.answered + o.failed; sent > 0 {
		if fail := float64(s.Errors) / float64(sent); fail > slo.MaxErrorShare {
			s.Broke = append(s.Broke, fmt.Sprintf("%s of the requests failed > %s", report.Percent(fail), report.Percent(slo.MaxErrorShare)))
		}
	}
	if o.unsent > 0 && float64(o.unsent) > slo.MaxErrorShare*float64(n) {
		s.Broke = append(s.Broke, fmt.Sprintf("%d requests still waited for a free connection at the end", o.unsent))
	}
	for _, ob := range slo.Objectives {
		if v := o.percentile(ob.Percentile); v > ob.Bound {
			s.Broke = append(s.Broke, fmt.Sprintf("%s %s > %s", ob.Name(), report.Dur(v), report.Dur(ob.Bound)))
		}
	}
	// In steady state the requests end as fast as they are sent; when
	// fewer end, the rest queue, and would break any bound given time.
	// A few requests at the window's edges are noise.
	if rate > 0 && o.seconds > 0 {
		slack := 3 / (rate * o.seconds)
		if s.Throughput < rate*(keepUp-slack) {
			s.Broke = append(s.Broke, fmt.Sprintf("requests ended at %s/s of the %s/s sent: a queue grew", report.Rate(s.Throughput), report.Rate(rate)))
		}
	}
	if o.collapsed {
		s.Broke = append(s.Broke, "collapsed")
	}
	s.Pass = len(s.Broke) == 0
	return s
}

// collapsing reports a second of a step in which the service failed:
// half its requests or more failed, or, with requests due, none ended.
func collapsing(sec load.Second, rate float64) bool {
	failed := sec.Errors.Total() + sec.Status[4] + sec.Status[5]
	ended := sec.Requests + sec.Errors.Total()
	switch {
	case ended >= 10 && 2*failed >= ended:
		return true
	case rate*sec.Length.Seconds() >= 20 && ended == 0:
		return true
	}
	return false
}

// limiting is the objective whose percentile came closest to its bound,
// or went farthest over it, in a step: what the step's noise is read on.
func limiting(slo report.SLO, s report.Step) (report.Objective, time.Duration) {
	best, ratio := slo.Objectives[0], -1.0
	var at time.Duration
	for _, ob := range slo.Objectives {
		v, _ := s.At(ob.Percentile)
		if r := float64(v) / float64(ob.Bound); r > ratio {
			best, ratio, at = ob, r, v
		}
	}
	return best, at
}

// spread is the largest relative difference between two of vs.
func spread(vs []float64) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range vs {
		lo, hi = min(lo, v), max(hi, v)
	}
	if lo <= 0 || math.IsInf(lo, 0) {
		return 0
	}
	return hi/lo - 1
}
