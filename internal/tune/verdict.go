package tune

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/report"
)

// Verdicts.
const (
	Fixed    = "fixed"
	Improved = "improved"
	NoEffect = "no effect"
	Worse    = "worse"
	// NotJudged: none of the change's findings showed in the first run,
	// so the measurement cannot tell what the change did.
	NotJudged = "not judged"
)

// Measured is one measurement of a verification (Verify): the run's
// report and what Judge compares of it. run.Measure makes them.
type Measured struct {
	Report  *report.Run
	Outcome Outcome
}

// Outcome is one measurement: its findings and its counters' rates over
// the load window.
type Outcome struct {
	Findings []report.Finding
	Rate     func(counter string) float64
}

// significant is the share a counter's rate must move by to count.
const significant = 0.25

// Judge compares the findings each change targets before and after:
// fixed when none is left active (a latent one: gone), improved when one
// is less severe or its counters fell by a quarter, worse when one is
// more severe or its counters rose by a quarter, not judged when none
// showed before and none after, else no effect.
func Judge(p *Plan, before, after Outcome) []report.Verdict {
	var out []report.Verdict
	for _, c := range p.Changes {
		v := report.Verdict{Change: c.Title(), Key: c.Key}
		var better, worse, left, seen bool
		for _, target := range c.Findings {
			b, bok := find(before.Findings, target)
			a, aok := find(after.Findings, target)
			seen = seen || bok
			v.Before = append(v.Before, state(target, b, bok, before.Rate))
			v.After = append(v.After, state(target, a, aok, after.Rate))
			if !aok || (bok && b.Status == report.Active && a.Status != report.Active) {
				continue
			}
			left = true
			if !bok {
				worse = true
				continue
			}
			switch {
			case report.MoreSevere(a.Severity, b.Severity):
				worse = true
			case report.MoreSevere(b.Severity, a.Severity):
				better = true
			default:
				rb, ra := counterRate(b, before.Rate), counterRate(a, after.Rate)
				switch {
				case ra > rb*(1+significant) && ra-rb > 1:
					worse = true
				case ra < rb*(1-significant):
					better = true
				}
			}
		}
		switch {
		case worse:
			v.Verdict = Worse
		case !left && !seen:
			v.Verdict, v.Note = NotJudged, "its findings did not show in the first run, so this run cannot tell what it did"
			var was []string
			for _, target := range c.Findings {
				if st, ok := p.Seen[target]; ok {
					was = append(was, target+" "+st)
				}
			}
			if len(was) > 0 {
				v.Note += "; the plan's report had " + strings.Join(was, ", ") + ": another fault may hide it, verify again once the rest is fixed"
			}
		case !left:
			v.Verdict = Fixed
		case better:
			v.Verdict = Improved
		default:
			v.Verdict = NoEffect
		}
		out = append(out, v)
	}
	return out
}

// find looks a target ("id subject") up among findings; an active one
// wins over a latent one with the same key.
func find(fs []report.Finding, target string) (report.Finding, bool) {
	var got report.Finding
	ok := false
	for _, f := range fs {
		if key(f) != target || f.Side == "client" {
			continue
		}
		if !ok || (f.Status == report.Active && got.Status != report.Active) {
			got, ok = f, true
		}
	}
	return got, ok
}

// counterRate sums the rates of the counters a finding's window
// evidence names.
func counterRate(f report.Finding, rate func(string) float64) float64 {
	if rate == nil {
		return 0
	}
	sum := 0.0
	for _, c := range counters(f) {
		sum += rate(c)
	}
	return sum
}

func counters(f report.Finding) []string {
	var out []string
	for _, e := range f.Evidence {
		if e.Window && isCounter(e.Source) && !slices.Contains(out, e.Source) {
			out = append(out, e.Source)
		}
	}
	return out
}

// isCounter: a /proc/net/snmp or netstat counter is named "Group.Name".
func isCounter(s string) bool {
	g, n, ok := strings.Cut(s, ".")
	return ok && g != "" && n != "" && !strings.ContainsAny(s, " /:")
}

func state(target string, f report.Finding, ok bool, rate func(string) float64) string {
	if !ok {
		return target + ": not found"
	}
	s := fmt.Sprintf("%s: %s %s", target, f.Severity, f.Status)
	if rate != nil {
		for _, c := range counters(f) {
			s += fmt.Sprintf(", %s %.1f/s", c, rate(c))
		}
	}
	return s
}
