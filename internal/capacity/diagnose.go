package capacity

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/run"
)

// diagRate is the rate the diagnosis runs at: a step that broke the SLO,
// at least diagAbove × the capacity, so that the queue in front of what
// limits it grows fast enough to be seen; the highest rate that met the
// SLO when none broke it.
func (s *searcher) diagRate() float64 {
	lo, hi := s.bracket()
	switch {
	case s.genLimited || lo == 0:
		return hi
	case hi == 0:
		return lo
	}
	return max(hi, diagAbove*lo)
}

// diagnose runs the diagnosed step as `run` runs, both sides sampled,
// and reads what limited the capacity from its findings and the
// resources' headroom.
func (s *searcher) diagnose(ctx context.Context) (*run.Result, error) {
	rate := s.diagRate()
	if rate == 0 {
		return nil, nil
	}
	d := s.step
	if left := s.deadline.Sub(s.d.now()) - (s.reserve - s.step); left < d {
		d = left
	}
	if d < 2*time.Second {
		s.note("no time was left for the diagnosis of the step at %s req/s (--max-duration)", report.Rate(rate))
		return nil, nil
	}
	ro := s.o.Run
	ro.Load = s.o.Load
	lo := &ro.Load
	lo.Rate, lo.Grow, lo.Requests, lo.Ramp = rate, true, 0, nil
	var capped bool
	lo.Connections, capped = s.poolFor(rate)
	lo.Duration, lo.Measure = d, min(s.warm, d/4)
	lo.OnStart, lo.OnSecond = nil, nil
	ro.Baseline, ro.Tail = time.Second, time.Second
	ro.OnPhase = func(name string, pd time.Duration) {
		s.phase(fmt.Sprintf("diagnosis at %s req/s: %s", report.Rate(rate), name), pd)
	}
	start := s.d.now()
	res, err := s.d.diagnose(ctx, ro)
	if err != nil {
		return nil, err
	}
	out := outcomeOf(res.Load, false)
	if capped && out.queued > 0 {
		out.saturated = append(out.saturated, fmt.Sprintf("%d requests waited in the load generator for one of its %d connections (%s)", out.queued, lo.Connections, s.capWhy()))
	}
	st := judge(s.o.SLO, rate, out)
	st.Phase, st.Connections, st.Start, st.Warmup = "diagnosis", lo.Connections, start, lo.Measure
	s.add(st)
	r := res.Report()
	s.rep.Diagnosis = r
	if st.Pass {
		s.note("the diagnosed step, at %s req/s, met the SLO this time: the knee moves from run to run, and what its diagnosis names is what was fullest", report.Rate(rate))
	}
	s.rep.Headroom = rules.Headroom(res.Run, res.Findings)
	var generator []string
	if s.genLimited || len(st.GeneratorLimited) > 0 && !st.Pass {
		generator = s.generatorReasons()
	}
	s.rep.LimitedBy = limitedBy(r.Findings, s.rep.Headroom, generator, st.Pass)
	return res, nil
}

// atLimit is the share of its limit from which a resource no finding
// named is named as what limited the capacity.
const atLimit = 0.9

// limitedBy picks what limited the capacity from the diagnosed step.
// When the load generator limited it, that alone: the service's own
// findings are in the diagnosis, and nothing of its is blamed. Else, in
// order: the active findings that account for failed requests, as the
// diagnosis ranks them; what had no room for more requests at once (a
// full pool, a full accept queue: the findings, and the resources the
// headroom found full with requests waiting though no rule named them);
// the other findings that explain a slow or failing load (a busy CPU);
// and, when nothing else does, the unexplained distress, and the other
// resources found at their limit, or else the listeners in front of
// which many connections waited to be accepted. Consequences are left
// out: their causes are listed. When the diagnosed step met the SLO
// (met), its slow tail within the SLO limited nothing: the fullest
// resource is the likely limit, said as such.
func limitedBy(fs []report.Finding, head []report.Headroom, generator []string, met bool) []report.Limit {
	out := []report.Limit{}
	if len(generator) > 0 {
		for _, f := range rules.LoadGen(&load.Result{Saturated: true, SaturatedBy: generator}) {
			out = append(out, report.Limit{Finding: f, Basis: report.BasisGenerator})
		}
		return out
	}
	var failing, full, slow, unexplained []report.Limit
	for _, f := range fs {
		c := rules.ClassOf(f.ID)
		if f.Status != report.Active || f.CausedBy != "" || c.Generator || f.Severity == report.Info {
			continue
		}
		l := report.Limit{Finding: f, Basis: report.BasisFinding}
		switch {
		case c.Residual:
			unexplained = append(unexplained, l)
		case f.Failed > 0 && c.Errors:
			failing = append(failing, l)
		case c.AtCapacity:
			full = append(full, l)
		case c.Errors || c.Delays:
			slow = append(slow, l)
		}
	}
	named := func(id report.FindingID) bool {
		for _, l := range append(append(slices.Clone(failing), full...), slow...) {
			if l.ID == id {
				return true
			}
		}
		return false
	}
	var rest []report.Limit
	for _, h := range head {
		if h.Share < atLimit || h.Finding == "" || named(h.Finding) {
			continue
		}
		l := headroomLimit(h)
		if rules.ClassOf(h.Finding).AtCapacity || h.Queued {
			full = append(full, l)
		} else {
			rest = append(rest, l)
		}
	}
	out = append(append(append(out, failing...), full...), slow...)
	if len(out) > 0 {
		return out
	}
	// No finding names a cause: a resource the diagnosed step's
	// accounting shows at or near its limit (the host's CPUs, shared by
	// the servers and the load generator) is what ran out, not an
	// unexplained distress.
	if len(rest) == 0 {
		for _, h := range head {
			if h.Share >= nearLimit && h.Finding != "" {
				rest = append(rest, headroomLimit(h))
				break
			}
		}
	}
	if len(rest) > 0 {
		return append(out, rest...)
	}
	// Nor near its limit: where the requests waited. A listener whose
	// accept queue held many connections, though it had room, had a
	// server behind it that took them slower than they came (php-fpm's
	// children bound to the connections nginx keeps open, with more
	// connections than children).
	for _, h := range head {
		if h.Resource == "accept-queue" && h.Used >= queuedAccepts {
			l := headroomLimit(h)
			l.Basis = report.BasisQueued
			l.Title = fmt.Sprintf("connections waited to be accepted on %s, %.0f at most: the server behind it took them slower than they came", h.Subject, h.Used)
			out = append(out, l)
		}
	}
	if len(out) > 0 {
		return out
	}
	if met {
		for _, h := range head {
			if h.Share > 0 && h.Finding != "" {
				l := headroomLimit(h)
				l.Basis = report.BasisFullest
				l.Title = fmt.Sprintf("%s %s, the fullest resource at %s of its limit", h.Resource, h.Subject, report.Percent(h.Share))
				return append(out, l)
			}
		}
	}
	return append(out, unexplained...)
}

// nearLimit is the share of its limit from which the fullest resource is
// named as what limited the capacity when no finding names a cause.
const nearLimit = 0.75

// queuedAccepts is how many connections waiting in a listener's accept
// queue, with room left, name that listener's server as where the
// requests waited when nothing else limited the capacity: far more than
// the few a burst of new connections leaves there.
const queuedAccepts = 64

// headroomLimit is a resource at its limit as a limit of the capacity.
func headroomLimit(h report.Headroom) report.Limit {
	f := report.Finding{ID: h.Finding, Severity: report.Warning, Status: report.Active, Side: h.Side, Subject: h.Subject,
		Title:    fmt.Sprintf("%s %s at %s of its limit", h.Resource, h.Subject, report.Percent(h.Share)),
		Evidence: []report.Item{{Text: h.Text, Source: "headroom", Window: true}}}
	return report.Limit{Finding: f, Basis: report.BasisHeadroom}
}

// generatorReasons are why the load generator limited the steps that
// broke the SLO above the capacity, each said once.
func (s *searcher) generatorReasons() []string {
	_, hi := s.bracket()
	var out []string
	for _, st := range s.rep.Steps {
		if st.Pass || st.Rate < hi {
			continue
		}
		for _, why := range st.GeneratorLimited {
			if !slices.Contains(out, why) {
				out = append(out, why)
			}
		}
	}
	return out
}
