package capacity

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
)

// Options describe one search.
type Options struct {
	// Load is the request and how to send it: the URL, method, headers,
	// body, script, timeout, threads, keep-alive. Connections, when set,
	// is the most any step opens; 0 sizes each step's pool from its rate
	// and the SLO (poolFor). Duration, Rate, Requests and Ramp are the
	// search's own.
	Load load.Options
	// Run says how the diagnosis observes the sides: the server's
	// namespace or agent, the resolvers (Load and the phases are set by
	// the search).
	Run run.Options
	SLO report.SLO
	// MaxDuration bounds the whole search, the diagnosis included;
	// default 2 minutes.
	MaxDuration time.Duration
	// Step is each step's length, warm-up included; 0 fits it to
	// MaxDuration (5 s for 2 minutes, at least 2 s).
	Step time.Duration
	// Resolution is how close the last passing and the first failing
	// rate must be, relative, for the search to stop; default 0.05.
	Resolution float64
	// MinRate is the lowest rate tried (default 1 request a second);
	// MaxRate, when set, the highest.
	MinRate, MaxRate float64
	// NoDiagnosis skips the diagnosis of the knee.
	NoDiagnosis bool
	// Steps, if set, sends each step's load (Workers: shared by worker
	// processes), the closed-loop probe's included; nil sends it from
	// this process. The settling between steps (one request at a time)
	// and the diagnosis stay in this process.
	Steps Loader `json:"-"`
	// OnStep, if set, is called as each step ends; OnPhase as each
	// begins, with what it is and how long it takes.
	OnStep  func(report.Step)                  `json:"-"`
	OnPhase func(what string, d time.Duration) `json:"-"`
}

// Result is a finished search: its report, and the diagnosed run's
// result (for its HTML page), nil when there was none.
type Result struct {
	Report    *report.Capacity
	Diagnosis *run.Result
}

// Verified is capacity --verify-with's outcome: both searches, and the
// diagnosed runs for their pages.
type Verified struct {
	Report        *report.CapacityVerify
	Before, After *Result
}

// ErrBudget reports a --max-duration too short to search in.
var ErrBudget = errors.New("time budget too short")

// Fixed parts of the budget.
const (
	// probeLen is the closed-loop probe's length, probeConns its
	// connections when -c does not say.
	probeLen   = 2 * time.Second
	probeConns = 10
	// settleMax bounds the wait after a step that broke the SLO for the
	// service to answer within it again.
	settleMax = 3 * time.Second
	// diagOverhead is the diagnosis's time besides its load: baseline,
	// tail, discovering the servers, the first snapshots.
	diagOverhead = 5 * time.Second
	// minBudget is the shortest --max-duration a search runs in.
	minBudget = 20 * time.Second
	// diagAbove is how far above the capacity the diagnosed step runs,
	// at least: just over the knee a queue grows so slowly that the
	// rules, which need it to have grown, may not see it in a step.
	diagAbove = 1.2
)

// driver runs the loads of a search: load.Run and run.Run, or a test's
// model of a service.
type driver interface {
	// load runs a load and returns its measured part; collapse, when
	// set, stops it early on a second it reports.
	load(ctx context.Context, o load.Options, collapse func(load.Second) bool) (outcome, error)
	// diagnose runs a load as `run` does.
	diagnose(ctx context.Context, o run.Options) (*run.Result, error)
	// settle waits, until deadline, for the service to answer a request
	// within bound again.
	settle(ctx context.Context, o load.Options, bound time.Duration, deadline time.Time)
	now() time.Time
}

// Search finds the highest rate the service answers within the SLO.
func Search(ctx context.Context, o Options) (*Result, error) {
	return search(ctx, o, live{o.Steps})
}

// searcher is one search's state.
type searcher struct {
	o        Options
	d        driver
	rep      *report.Capacity
	start    time.Time
	deadline time.Time
	step     time.Duration
	warm     time.Duration
	reserve  time.Duration // kept for the diagnosis
	limit    int           // the most connections a step may open
	// passed and failed are the rates that met the SLO and broke it,
	// each with how many times; a rate is good when it never broke it.
	passed, failed map[float64]int
	genLimited     bool
}

func search(ctx context.Context, o Options, d driver) (*Result, error) {
	if o.MaxDuration == 0 {
		o.MaxDuration = 2 * time.Minute
	}
	if o.Resolution == 0 {
		o.Resolution = 0.05
	}
	if o.MinRate == 0 {
		o.MinRate = 1
	}
	if len(o.SLO.Objectives) == 0 {
		slo, err := ParseSLO(nil)
		if err != nil {
			return nil, err
		}
		o.SLO = slo
	}
	if o.MaxDuration < minBudget {
		return nil, fmt.Errorf("%w: --max-duration %v leaves no room for a search and its diagnosis: at least %v", ErrBudget, o.MaxDuration, minBudget)
	}
	if o.MaxRate > 0 && o.MaxRate < o.MinRate {
		return nil, fmt.Errorf("%w: --max-rate %g is below the lowest rate tried, %g", load.ErrInvalid, o.MaxRate, o.MinRate)
	}
	// load's own defaults: the pools (poolFor) and the timeout's check
	// below size with what the load will use.
	if o.Load.Timeout == 0 {
		o.Load.Timeout = 2 * time.Second
	}
	if o.Load.Threads == 0 {
		o.Load.Threads = 2
	}
	s := &searcher{o: o, d: d, start: d.now(), passed: map[float64]int{}, failed: map[float64]int{}}
	s.deadline = s.start.Add(o.MaxDuration)
	s.plan()
	s.limit = load.ConnectionLimit()
	if o.Load.Connections > 0 {
		s.limit = min(s.limit, o.Load.Connections)
	}
	s.rep = &report.Capacity{Version: report.Version, Command: "capacity", URL: o.Load.URL, SLO: o.SLO, MaxDuration: o.MaxDuration,
		LimitedBy: []report.Limit{}, Headroom: []report.Headroom{}, Steps: []report.Step{}}
	if maxBound(o.SLO) >= o.Load.Timeout {
		s.o.Load.Timeout = 2 * maxBound(o.SLO)
		s.note("--timeout %v is within the SLO's bound: requests time out at %v instead, so that a slow one counts at its latency", o.Load.Timeout, s.o.Load.Timeout)
	}
	// The search's own context ends at the budget: a step that runs
	// over it (a slow host) is cut there, and the report still written.
	ctx, cancel := context.WithTimeout(ctx, o.MaxDuration)
	defer cancel()
	x0, err := s.probe(ctx)
	if err != nil {
		return nil, err
	}
	s.rep.Stopped = s.find(ctx, x0)
	res := &Result{Report: s.rep}
	if !o.NoDiagnosis && ctx.Err() == nil {
		diag, err := s.diagnose(ctx)
		if err != nil {
			return nil, err
		}
		res.Diagnosis = diag
	}
	s.finish()
	s.rep.Elapsed = d.now().Sub(s.start)
	return res, nil
}

// plan fits the steps and the diagnosis into the budget.
func (s *searcher) plan() {
	s.step = s.o.Step
	if s.step == 0 {
		// About fourteen steps, the probe and the diagnosis fit:
		// 5 s each for 2 minutes, as short as 2 s for less.
		avail := s.o.MaxDuration - probeLen - diagOverhead
		s.step = min(5*time.Second, max(2*time.Second, (avail/15).Round(100*time.Millisecond)))
	}
	s.warm = max(500*time.Millisecond, s.step/5)
	if !s.o.NoDiagnosis {
		s.reserve = s.step + diagOverhead
		if s.o.Run.ServerAgent != nil && !s.o.Run.NoPathProbe {
			s.reserve += 5 * time.Second // the path probe
		}
	}
}

// left is the budget left for steps, the diagnosis's kept aside.
func (s *searcher) left() time.Duration {
	return s.deadline.Sub(s.d.now()) - s.reserve
}

func (s *searcher) note(format string, args ...any) {
	s.rep.Notes = append(s.rep.Notes, fmt.Sprintf(format, args...))
}

// poolFor is how many connections a step at rate may open: enough for
// every request in flight while the latency stays within twice the
// SLO's longest bound (Little's law), so that the generator's pool is
// never what breaks a step the service would meet; the pool opens them
// only as requests need them (load.Options.Grow). -c, or the open-file
// limit, may hold it lower: capped says so.
func (s *searcher) poolFor(rate float64) (n int, capped bool) {
	want := int(math.Ceil(rate*2*maxBound(s.o.SLO).Seconds())) + 2*max(s.o.Load.Threads, 1)
	return max(1, min(want, s.limit)), want > s.limit
}

// capWhy says what holds the steps' connections below what a rate needs.
func (s *searcher) capWhy() string {
	if s.o.Load.Connections > 0 && s.o.Load.Connections == s.limit {
		return "-c " + strconv.Itoa(s.limit)
	}
	return "the open-file limit"
}

// probe runs the closed loop that says where to start: its goodput at
// -c connections (10 by default) is about the service's throughput at
// that concurrency.
func (s *searcher) probe(ctx context.Context) (float64, error) {
	lo := s.o.Load
	lo.Rate, lo.Grow, lo.Requests, lo.Ramp = 0, false, 0, nil
	if lo.Connections == 0 {
		lo.Connections = probeConns
	}
	lo.Connections = min(lo.Connections, s.limit)
	lo.Duration = min(probeLen, s.step/2)
	lo.Measure = lo.Duration / 4
	s.phase("probe", lo.Duration)
	start := s.d.now()
	out, err := s.d.load(ctx, lo, nil)
	if err != nil {
		return 0, err
	}
	st := judge(s.o.SLO, 0, out)
	st.Phase, st.Connections, st.Start, st.Warmup = "probe", lo.Connections, start, lo.Measure
	s.add(st)
	return st.Goodput, nil
}

// find runs the steps: doubling while they meet the SLO, then bisecting
// between the last rate that met it and the first that broke it; last,
// the capacity's rate again for the noise. It returns why it stopped.
func (s *searcher) find(ctx context.Context, x0 float64) string {
	next := max(s.o.MinRate, 0.7*x0)
	if s.o.MaxRate > 0 {
		next = min(next, s.o.MaxRate)
	}
	repeated := false
	for {
		if ctx.Err() != nil {
			return "interrupted"
		}
		if s.left() < s.step {
			return "out of time (--max-duration)"
		}
		st := s.runStep(ctx, next, "search")
		lo, hi := s.bracket()
		if !st.Pass && len(st.GeneratorLimited) > 0 && lo > 0 {
			// Above lo the generator, not the service, is measured.
			return fmt.Sprintf("the load generator limited the step at %s req/s: the service may take more", report.Rate(next))
		}
		switch {
		case hi == 0 && s.o.MaxRate > 0 && lo >= s.o.MaxRate:
			return fmt.Sprintf("met the SLO at --max-rate %s req/s", report.Rate(s.o.MaxRate))
		case hi == 0:
			next = 2 * lo
			if lo < x0 {
				next = x0 // the probe's throughput, before doubling
			}
			if s.o.MaxRate > 0 {
				next = min(next, s.o.MaxRate)
			}
			continue
		case lo == 0 && hi <= s.o.MinRate:
			return fmt.Sprintf("no rate down to %s req/s met the SLO", report.Rate(s.o.MinRate))
		case lo == 0:
			next = max(s.o.MinRate, hi/4)
			continue
		case hi/lo > 1+s.o.Resolution:
			next = math.Sqrt(lo * hi)
			continue
		}
		// Converged. Once, if time allows, the capacity's rate again:
		// what a second run of it measures is the noise, and a rate
		// that breaks the SLO once is not the capacity.
		if repeated || s.left() < 2*s.step {
			return fmt.Sprintf("converged: %s–%s req/s, within %.0f %%", report.Rate(lo), report.Rate(hi), 100*(hi/lo-1))
		}
		repeated = true
		s.runStep(ctx, lo, "repeat")
		if l2, h2 := s.bracket(); l2 == lo && h2 == hi {
			return fmt.Sprintf("converged: %s–%s req/s, within %.0f %%, and %s req/s met the SLO again", report.Rate(lo), report.Rate(hi), 100*(hi/lo-1), report.Rate(lo))
		} else if l2 == 0 {
			next = max(s.o.MinRate, h2/4)
		} else {
			next = math.Sqrt(l2 * h2)
		}
	}
}

// bracket is the highest rate that met the SLO every time it ran and
// the lowest above it that broke it (0 when none).
func (s *searcher) bracket() (lo, hi float64) {
	defer func() { s.genLimited = hi > 0 && s.limitedAt(hi) }()
	for r := range s.passed {
		if s.failed[r] == 0 && r > lo {
			lo = r
		}
	}
	for r := range s.failed {
		if r > lo && (hi == 0 || r < hi) {
			hi = r
		}
	}
	return lo, hi
}

// limitedAt reports a step at rate that broke the SLO with the load
// generator limited.
func (s *searcher) limitedAt(rate float64) bool {
	for _, st := range s.rep.Steps {
		if st.Rate == rate && !st.Pass && len(st.GeneratorLimited) > 0 && st.Phase != "diagnosis" {
			return true
		}
	}
	return false
}

// runStep runs one open-loop step at rate and judges it.
func (s *searcher) runStep(ctx context.Context, rate float64, phase string) report.Step {
	lo := s.o.Load
	lo.Rate, lo.Grow, lo.Requests, lo.Ramp = rate, true, 0, nil
	var capped bool
	lo.Connections, capped = s.poolFor(rate)
	lo.Duration, lo.Measure = s.step, s.warm
	lo.OnStart, lo.OnSecond = nil, nil
	s.phase(fmt.Sprintf("step %d: %s req/s", len(s.rep.Steps)+1, report.Rate(rate)), s.step)
	start := s.d.now()
	collapse := func(sec load.Second) bool {
		return time.Duration(sec.Index)*time.Second >= s.warm && collapsing(sec, rate)
	}
	out, err := s.d.load(ctx, lo, collapse)
	var st report.Step
	if err != nil {
		st = report.Step{Rate: rate, Broke: []string{err.Error()}}
	} else {
		if capped && out.queued > 0 {
			// Requests waited for one of the few connections allowed:
			// the generator's pool, not the service, held them.
			out.saturated = append(out.saturated, fmt.Sprintf("%d requests waited in the load generator for one of its %d connections (%s)", out.queued, lo.Connections, s.capWhy()))
		}
		st = judge(s.o.SLO, rate, out)
	}
	st.Phase, st.Connections, st.Start, st.Warmup = phase, lo.Connections, start, s.warm
	s.add(st)
	if st.Pass {
		s.passed[rate]++
	} else {
		s.failed[rate]++
		// The service may still be working off what this step left
		// it: the next step starts once it answers in time again.
		end := s.d.now().Add(settleMax)
		if last := s.deadline.Add(-s.reserve); last.Before(end) {
			end = last
		}
		s.d.settle(ctx, s.o.Load, minBound(s.o.SLO), end)
	}
	return st
}

// add numbers a step and keeps it.
func (s *searcher) add(st report.Step) {
	st.N = len(s.rep.Steps) + 1
	s.rep.Steps = append(s.rep.Steps, st)
	if s.o.OnStep != nil {
		s.o.OnStep(st)
	}
}

func (s *searcher) phase(what string, d time.Duration) {
	if s.o.OnPhase != nil {
		s.o.OnPhase(what, d)
	}
}

// finish fills the capacity, its bracket and noise, and the verdict.
func (s *searcher) finish() {
	c := s.rep
	lo, hi := s.bracket()
	c.CapacityRPS, c.Bracket = lo, report.Bracket{Pass: lo, Fail: hi}
	c.GeneratorLimited = s.genLimited
	if s.genLimited && len(c.LimitedBy) == 0 {
		c.LimitedBy = limitedBy(nil, nil, s.generatorReasons(), false)
	}
	c.Noise = s.noise(lo)
	var what string
	switch {
	case lo == 0:
		what = fmt.Sprintf("NONE: no rate met the SLO (%s); the lowest tried, %s req/s, broke it", c.SLO.Text, report.Rate(hi))
	case s.genLimited:
		what = fmt.Sprintf("AT LEAST %s req/s within %s: the load generator limited the search at %s req/s, not the service", report.Rate(lo), c.SLO.Text, report.Rate(hi))
	case hi == 0:
		what = fmt.Sprintf("AT LEAST %s req/s within %s: no rate tried broke it", report.Rate(lo), c.SLO.Text)
	default:
		what = fmt.Sprintf("CAPACITY: %s req/s within %s (met at %s, broken at %s req/s)", report.Rate(lo), c.SLO.Text, report.Rate(lo), report.Rate(hi))
	}
	if len(c.LimitedBy) > 0 {
		l := c.LimitedBy[0]
		what += "; limited by " + string(l.ID)
		if l.Subject != "" {
			what += " (" + l.Subject + ")"
		}
	}
	c.Verdict = what
}

// noise is the spread between the runs of the rate that ran most often
// near the capacity, nil when none ran twice.
func (s *searcher) noise(lo float64) *report.Noise {
	var runs []report.Step
	for _, st := range s.rep.Steps {
		if st.Rate == lo && st.Rate > 0 && (st.Phase == "search" || st.Phase == "repeat") {
			runs = append(runs, st)
		}
	}
	if len(runs) < 2 {
		return nil
	}
	ob, _ := limiting(s.o.SLO, runs[0])
	n := &report.Noise{Rate: lo, Objective: ob.Name()}
	var lat []float64
	for _, st := range runs {
		v, _ := st.At(ob.Percentile)
		n.Latency = append(n.Latency, v)
		n.Goodput = append(n.Goodput, st.Goodput)
		lat = append(lat, float64(v))
	}
	n.Spread = max(spread(lat), spread(n.Goodput))
	return n
}
