package rules

import (
	"fmt"
	"strings"

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
	if b == nil {
		return relate(fs)
	}
	if w, ok := b.Window(); ok {
		for i := range fs {
			if fs[i].ID == PacketLoss && fs[i].Status == report.Active {
				dropLoss(fs, &fs[i], w)
			}
		}
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
			cl, rose := clean(out, r)
			out = append(out, rule.Check(&Input{Run: r, Found: out, Shape: shape, Clean: cl, Rose: rose})...)
		}
	}
	tieShape(out, shape)
	lossCauses(out, r)
	out = relate(out)
	explain(out, r.Load, r.Port)
	return rank(out, r.Load), shape
}

// clean lists what the registry's rules looked at and found nothing
// active in, exactly: not a rule whose watched counters rose on a side
// without a finding (those are in rose, with the counters), nor one that
// had nothing to look at (the dependencies when no server's connections
// were traced, the drop monitor's rules without it, the CPU rules when no
// server's threads were accounted).
func clean(found []report.Finding, r *Run) (clean, rose []string) {
	active := map[report.FindingID]bool{}
	for _, f := range found {
		if f.Status == report.Active {
			active[f.ID] = true
		}
	}
	for _, rule := range Registry {
		if rule.Scope == Symptom || rule.Checks == "" || rule.LooksIn != nil && !rule.LooksIn(r) {
			continue
		}
		hit := false
		for _, id := range rule.IDs {
			hit = hit || active[id]
		}
		if hit {
			continue
		}
		if rule.Looks != nil && !looked(r, rule.Looks) {
			continue
		}
		if moved := watched(r, rule.Watches); len(moved) > 0 {
			rose = append(rose, rule.Checks+" ("+strings.Join(moved, ", ")+")")
			continue
		}
		clean = append(clean, rule.Checks)
	}
	return clean, rose
}

// looked reports whether any observed side's window had what a rule
// reads.
func looked(r *Run, looks func(*evidence.Snapshot) bool) bool {
	for _, s := range r.Sides {
		if !s.Observed || s.Bundle == nil {
			continue
		}
		for i := range r.Window(s).Snapshots {
			if looks(&r.Window(s).Snapshots[i]) {
				return true
			}
		}
	}
	return false
}

// watched says which of the counters rose on which observed side, in
// the load's window: "TcpExt.TCPSynRetrans +593 on the client".
func watched(r *Run, counters []string) []string {
	var out []string
	seen := map[*evidence.Bundle]bool{}
	for _, s := range r.Sides {
		if !s.Observed || s.Bundle == nil || seen[s.Bundle] {
			continue
		}
		seen[s.Bundle] = true
		w, ok := r.Window(s).Window()
		if !ok {
			continue
		}
		name := string(s.Name)
		if s.SameAs != "" {
			name = string(report.Local)
		}
		for _, c := range counters {
			if d, _ := w.Counter(c); d > 0 {
				out = append(out, fmt.Sprintf("%s +%d on the %s side", c, d, name))
			}
		}
	}
	return out
}

// accounted reports whether any server's threads were accounted (CPU
// time, run delay) during the run.
func accounted(r *Run) bool {
	for _, s := range r.Servers {
		for _, smp := range s.Samples {
			if smp.CPU != nil {
				return true
			}
		}
	}
	return false
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
