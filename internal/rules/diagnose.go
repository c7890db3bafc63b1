package rules

import (
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Check runs the rules that read one namespace's snapshots (PerSide and
// PerHost) over a bundle: what check and diagnose report, ordered by
// impact. A bundle without snapshots has no findings.
func Check(b *evidence.Bundle) []report.Finding { return check(b, Registry) }

func check(b *evidence.Bundle, rules []Rule) []report.Finding {
	if b == nil || len(b.Snapshots) == 0 {
		return nil
	}
	in := &Input{Bundle: b}
	var out []report.Finding
	for _, r := range rules {
		if r.Scope == PerSide || r.Scope == PerHost {
			out = append(out, r.Check(in)...)
		}
	}
	return report.Sort(out)
}

// CheckHost is what check, the agent and diagnose report: the snapshot
// rules (Check) and the dependencies traced under the host's own traffic
// (CheckTraced), related as a run's are, so a dependency's own finding
// (its queue overflowing, its own pool saturated) is named as the cause
// of the wait its clients show, across any number of servers.
func CheckHost(b *evidence.Bundle, t *report.Traced) []report.Finding {
	fs := append(Check(b), CheckTraced(t, b)...)
	if len(fs) == 0 {
		return nil
	}
	return relate(fs)
}

// Diagnose runs every rule over a run, then the steps that look across
// findings, and returns the findings in report order with the shape of
// the throughput:
//
//  1. the PerSide and PerHost rules on each observed side's load window;
//     a finding whose counters rose as fast in the quiet baseline is
//     said to be background (baseline);
//  2. the PerRun rules, then the Symptom rules, which see all of that;
//  3. the throughput's shape, tied to the findings whose counters moved
//     with it (tieShape);
//  4. causes related to their symptoms and put first (relate), the share
//     of the failed requests each cause accounts for (explain), and the
//     causes that hurt most first (rank).
func Diagnose(r *Run) ([]report.Finding, report.Shape) {
	var out []report.Finding
	seen := map[*evidence.Bundle]bool{}
	judged := map[string]bool{} // "rule host": host-wide evidence is judged once
	for _, s := range r.Sides {
		if !s.Observed || s.Bundle == nil || seen[s.Bundle] {
			continue
		}
		seen[s.Bundle] = true
		name := s.Name
		if s.SameAs != "" {
			name = report.Local
		}
		in := &Input{Bundle: r.Window(s), Side: name, Run: r}
		if len(in.Bundle.Snapshots) == 0 {
			continue
		}
		var side []report.Finding
		for _, rule := range Registry {
			if rule.Scope != PerSide && rule.Scope != PerHost {
				continue
			}
			host := rule.Name + " " + s.Bundle.Host.Hostname
			if rule.Scope == PerHost && judged[host] {
				continue
			}
			found := rule.Check(in)
			if rule.Scope == PerHost && len(found) > 0 {
				judged[host] = true
			}
			for _, f := range found {
				f.Side = name
				side = append(side, f)
			}
		}
		side = report.Sort(side)
		baseline(side, s.Bundle, r.LoadStart, name, r.Load)
		out = append(out, side...)
	}
	var shape report.Shape
	for _, s := range r.Sides {
		if s.Observed && s.Bundle != nil && r.Load != nil {
			shape = analyse(r.Load.Timeline, r.Window(s))
			break
		}
	}
	for _, rule := range Registry {
		if rule.Scope == PerRun {
			out = append(out, rule.Check(&Input{Run: r, Shape: shape})...)
		}
	}
	for _, rule := range Registry {
		if rule.Scope == Symptom {
			out = append(out, rule.Check(&Input{Run: r, Found: out, Shape: shape, Clean: clean(out, traced(r))})...)
		}
	}
	tieShape(out, shape)
	out = relate(out)
	explain(out, r.Load, r.Port)
	return rank(out, r.Load), shape
}

// clean lists what the registry's rules looked at and found nothing
// active in; the dependencies only when traced (a run that saw no
// server's connections looked at none).
func clean(found []report.Finding, deps bool) []string {
	active := map[report.FindingID]bool{}
	for _, f := range found {
		if f.Status == report.Active {
			active[f.ID] = true
		}
	}
	var out []string
	for _, r := range Registry {
		if r.Scope == Symptom || r.Checks == "" || r.Name == "dependency" && !deps {
			continue
		}
		hit := false
		for _, id := range r.IDs {
			hit = hit || active[id]
		}
		if !hit {
			out = append(out, r.Checks)
		}
	}
	return out
}

// traced reports whether the run traced any server's dependencies.
func traced(r *Run) bool {
	for _, s := range r.Servers {
		if len(s.Deps) > 0 {
			return true
		}
	}
	return false
}
