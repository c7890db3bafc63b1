package capacity

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
)

// model is a service of known capacity for the search's unit tests: it
// answers up to capacity requests a second in service each, at about
// that latency; above, its queue grows by the excess each second and
// the latency with it. Time is its own: each load moves its clock by the
// load's length, so the tests measure no wall clock.
type model struct {
	capacity float64
	service  time.Duration
	// failBelow: below this rate every request fails (a service down).
	failBelow float64
	// flaky: the first run of this rate breaks the SLO, the others not.
	flaky float64
	// generatorAbove: steps above this rate are limited by the load
	// generator (its threads busy) and fail.
	generatorAbove float64
	clock          time.Time
	loads          []load.Options
	runs           map[float64]int
	diagnosed      []run.Options
}

func newModel(capacity float64, service time.Duration) *model {
	return &model{capacity: capacity, service: service, clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), runs: map[float64]int{}}
}

func (m *model) now() time.Time { return m.clock }

func (m *model) outcome(o load.Options) outcome {
	m.loads = append(m.loads, o)
	m.clock = m.clock.Add(o.Duration)
	secs := (o.Duration - o.Measure).Seconds()
	rate := o.Rate
	if rate == 0 { // closed loop: the service's throughput
		rate = m.capacity
	}
	m.runs[rate]++
	if rate < m.failBelow || m.failBelow < 0 {
		n := uint64(rate * secs)
		return outcome{seconds: secs, failed: n, percentile: func(float64) time.Duration { return 2 * time.Second }}
	}
	lat := time.Duration(float64(m.service) * (1 + 0.5*min(rate/m.capacity, 1)))
	ended := rate
	if rate > m.capacity {
		// The queue grows by the excess each second: the latency of the
		// last request of the step is its queue's.
		queue := (rate - m.capacity) * o.Duration.Seconds()
		lat += time.Duration(queue / m.capacity * float64(time.Second))
		ended = m.capacity
	}
	if o.Rate > 0 && float64(o.Connections) < rate*m.service.Seconds() {
		// Too few connections for the requests in flight: they
		// wait in the generator, and end as fast as the few carry
		// them.
		ended = min(ended, float64(o.Connections)/m.service.Seconds())
		lat += time.Duration((rate - ended) * o.Duration.Seconds() / ended * float64(time.Second))
		n := uint64(ended * secs)
		return outcome{seconds: secs, answered: n, good: n, queued: n, opened: uint64(o.Connections), percentile: func(p float64) time.Duration {
			return time.Duration(float64(lat) * p / 100)
		}}
	}
	if rate == m.flaky && m.runs[rate] == 1 {
		lat = 10 * time.Second
	}
	n := uint64(ended * secs)
	out := outcome{seconds: secs, answered: n, good: n, opened: uint64(o.Connections), percentile: func(p float64) time.Duration {
		return time.Duration(float64(lat) * p / 100)
	}}
	if m.generatorAbove > 0 && rate > m.generatorAbove {
		out.saturated = []string{"thread 0 was on CPU 97% of the run"}
		out.percentile = func(float64) time.Duration { return 10 * time.Second }
	}
	return out
}

func (m *model) load(_ context.Context, o load.Options, _ func(load.Second) bool) (outcome, error) {
	return m.outcome(o), nil
}

func (m *model) diagnose(_ context.Context, o run.Options) (*run.Result, error) {
	m.diagnosed = append(m.diagnosed, o)
	m.clock = m.clock.Add(o.Baseline + o.Load.Duration + o.Tail + 2*time.Second)
	return &run.Result{Run: &evidence.Run{Load: &load.Result{URL: o.Load.URL, Rate: o.Load.Rate}}}, nil
}

func (m *model) settle(context.Context, load.Options, time.Duration, time.Time) {
	m.clock = m.clock.Add(500 * time.Millisecond)
}

func mustSLO(t *testing.T, specs ...string) report.SLO {
	t.Helper()
	slo, err := ParseSLO(specs)
	if err != nil {
		t.Fatal(err)
	}
	return slo
}

func searchModel(t *testing.T, m *model, o Options) *report.Capacity {
	t.Helper()
	o.Load.URL = "http://127.0.0.1:8080/"
	res, err := search(context.Background(), o, m)
	if err != nil {
		t.Fatal(err)
	}
	c := res.Report
	if c.Elapsed > c.MaxDuration {
		t.Errorf("the search took %v of its %v", c.Elapsed, c.MaxDuration)
	}
	return c
}

// TestSearchFindsKnee: a service of 80 requests/s at 50 ms (4 workers ×
// 50 ms) under p99<=250ms: the capacity is within the resolution below
// the knee, the first failing rate above it, the capacity's rate ran
// twice (noise), and the diagnosis ran above the capacity.
func TestSearchFindsKnee(t *testing.T) {
	m := newModel(80, 50*time.Millisecond)
	c := searchModel(t, m, Options{SLO: mustSLO(t, "p99<=250ms")})
	if c.CapacityRPS < 76 || c.CapacityRPS > 80 || c.Bracket.Fail <= 80 || c.Bracket.Fail > c.CapacityRPS*1.05 {
		t.Errorf("capacity %.1f, bracket %+v: want 76–80 and the first failing rate within 5 %% above", c.CapacityRPS, c.Bracket)
	}
	if c.Noise == nil || c.Noise.Rate != c.CapacityRPS || len(c.Noise.Latency) != 2 {
		t.Errorf("noise %+v: want the capacity's rate run twice", c.Noise)
	}
	if c.Steps[0].Phase != "probe" || c.Steps[len(c.Steps)-1].Phase != "diagnosis" {
		t.Errorf("phases: first %s, last %s", c.Steps[0].Phase, c.Steps[len(c.Steps)-1].Phase)
	}
	if len(m.diagnosed) != 1 || m.diagnosed[0].Load.Rate < diagAbove*c.CapacityRPS {
		t.Errorf("diagnosed %d steps, at %v: want one at ≥ %.0f", len(m.diagnosed), m.diagnosed, diagAbove*c.CapacityRPS)
	}
	if !strings.HasPrefix(c.Verdict, "CAPACITY: ") || !strings.Contains(c.Stopped, "converged") {
		t.Errorf("verdict %q, stopped %q", c.Verdict, c.Stopped)
	}
	for _, o := range m.loads[1:] {
		// Each step's pool fits its rate at twice the bound (Little),
		// and two more per thread (load's default two).
		if want := int(math.Ceil(o.Rate*0.5)) + 2*2; o.Connections != want || !o.Grow || o.Measure <= 0 || o.Measure >= o.Duration {
			t.Errorf("step at %.1f/s: %d connections (want %d), grow %v, warm-up %v of %v", o.Rate, o.Connections, want, o.Grow, o.Measure, o.Duration)
		}
	}
}

// TestSearchBudget: however short or long the budget, the search and
// its diagnosis end within it, and a budget too short for any is
// refused in one line.
func TestSearchBudget(t *testing.T) {
	for _, d := range []time.Duration{20 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute} {
		m := newModel(2000, 2*time.Millisecond)
		c := searchModel(t, m, Options{SLO: mustSLO(t, "p99<=20ms"), MaxDuration: d})
		t.Logf("%v: %d steps in %v, %s; capacity %.0f", d, len(c.Steps), c.Elapsed, c.Stopped, c.CapacityRPS)
		if len(c.Steps) < 3 {
			t.Errorf("%v: %d steps", d, len(c.Steps))
		}
	}
	m := newModel(80, 50*time.Millisecond)
	if _, err := search(context.Background(), Options{MaxDuration: 15 * time.Second}, m); err == nil || len(m.loads) != 0 {
		t.Errorf("a 15 s budget: err %v after %d loads", err, len(m.loads))
	}
}

// TestSearchNoRate: a service failing every request has no capacity;
// the search goes down to the lowest rate and says so.
func TestSearchNoRate(t *testing.T) {
	m := newModel(500, 5*time.Millisecond)
	m.failBelow = -1
	c := searchModel(t, m, Options{})
	if c.CapacityRPS != 0 || c.Bracket.Pass != 0 || c.Bracket.Fail != 1 || !strings.HasPrefix(c.Verdict, "NONE") || !strings.Contains(c.Stopped, "no rate down to 1.00 req/s") {
		t.Errorf("capacity %.1f, bracket %+v, verdict %q, stopped %q", c.CapacityRPS, c.Bracket, c.Verdict, c.Stopped)
	}
}

// TestSearchFlaky: the capacity's rate breaks the SLO when run again:
// it is not the capacity, which is the highest rate that met it every
// time.
func TestSearchFlaky(t *testing.T) {
	m := newModel(80, 50*time.Millisecond)
	first := searchModel(t, newModel(80, 50*time.Millisecond), Options{SLO: mustSLO(t, "p99<=250ms")})
	// The same search, with the capacity's rate failing its second
	// run: m.flaky fails a rate's first run, so make it the repeat's
	// by running the rate once before.
	m.flaky = first.CapacityRPS
	m.runs[first.CapacityRPS] = -1
	c := searchModel(t, m, Options{SLO: mustSLO(t, "p99<=250ms")})
	if c.CapacityRPS >= first.CapacityRPS || c.CapacityRPS == 0 {
		t.Errorf("capacity %.1f with %.1f broken on its second run", c.CapacityRPS, first.CapacityRPS)
	}
}

// TestSearchGeneratorLimited: when the load generator limits a step,
// the search stops there, says the capacity is at least the last rate
// met, and blames nothing of the service's.
func TestSearchGeneratorLimited(t *testing.T) {
	m := newModel(100000, time.Millisecond)
	m.generatorAbove = 30000
	c := searchModel(t, m, Options{})
	if !c.GeneratorLimited || c.CapacityRPS == 0 || c.CapacityRPS > 30000 || !strings.HasPrefix(c.Verdict, "AT LEAST") {
		t.Fatalf("generator limited %v, capacity %.0f, verdict %q", c.GeneratorLimited, c.CapacityRPS, c.Verdict)
	}
	if len(c.LimitedBy) != 1 || c.LimitedBy[0].ID != report.LoadGeneratorSaturated || c.LimitedBy[0].Basis != report.BasisGenerator {
		t.Errorf("limited by %+v: want the load generator alone", c.LimitedBy)
	}
}

// TestSearchMaxRate: a service faster than --max-rate meets it, and the
// search stops there.
func TestSearchMaxRate(t *testing.T) {
	m := newModel(5000, time.Millisecond)
	c := searchModel(t, m, Options{MaxRate: 1000})
	if c.CapacityRPS != 1000 || c.Bracket.Fail != 0 || !strings.HasPrefix(c.Verdict, "AT LEAST 1000") {
		t.Errorf("capacity %.0f, bracket %+v, verdict %q", c.CapacityRPS, c.Bracket, c.Verdict)
	}
}

// TestSearchFewConnections: with -c 2, the generator's two connections
// carry 40 requests/s of 50 ms: above, requests wait in the generator,
// which is said, and the service is not blamed.
func TestSearchFewConnections(t *testing.T) {
	m := newModel(80, 50*time.Millisecond)
	c := searchModel(t, m, Options{Load: load.Options{Connections: 2}, SLO: mustSLO(t, "p99<=250ms")})
	if !c.GeneratorLimited || c.CapacityRPS == 0 || c.CapacityRPS > 40 || !strings.HasPrefix(c.Verdict, "AT LEAST") {
		t.Fatalf("generator limited %v, capacity %.1f, verdict %q", c.GeneratorLimited, c.CapacityRPS, c.Verdict)
	}
	if len(c.LimitedBy) != 1 || c.LimitedBy[0].Basis != report.BasisGenerator || !strings.Contains(c.LimitedBy[0].Evidence[0].Text, "for one of its 2 connections (-c 2)") {
		t.Errorf("limited by %+v", c.LimitedBy)
	}
}
