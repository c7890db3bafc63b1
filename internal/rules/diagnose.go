package rules

import (
	"fmt"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// diagnosis is one diagnosis as its passes see it: what it reads, a run
// or one namespace's bundle with the dependencies traced in it without
// a load, and what the passes made of it so far.
type diagnosis struct {
	// run is a run's evidence: both sides, the load, the servers; nil
	// for check, diagnose and the agent.
	run *evidence.Run
	// bundle and traced are a namespace's snapshots and the dependencies
	// traced under the host's own traffic, without a run.
	bundle  *evidence.Bundle
	traced  *evidence.Traced
	profile *evidence.HostProfile // check's profile of the servers
	// rules are the rules to run: the Registry, unless a test says.
	rules []Rule

	found []report.Finding
	shape report.Shape
}

// A pass is one step of the diagnosis. A pass that needs what its
// diagnosis lacks (a run, a load) does nothing.
type pass struct {
	name string
	// makes: it runs rules, which make findings; the other passes add
	// data to them and never change a rule's title, evidence or fix
	// (TestPassesAddData).
	makes bool
	do    func(*diagnosis)
}

// passes are the diagnosis, in order: check's, diagnose's and the
// agent's as much as run's and capacity's. The rules make findings; the
// passes after them look across findings and add what they find as data
// (a finding's cause, its share of the failed requests, its background,
// the throughput's shape), never rewriting a rule's words or fixes.
var passes = []pass{
	// The PerSide and PerHost rules on each namespace: check's bundle,
	// or each observed side's load window.
	{"namespace rules", true, namespaceRules},
	// A counter that rose as fast in the quiet seconds before a run's
	// load is background (baseline.go).
	{"baseline", false, baselines},
	// The dependencies traced without a load (check, the agent): the
	// rules that judge them (Rule.Traced).
	{"traced dependencies", true, tracedRules},
	// A run's throughput over time (shape.go).
	{"shape", false, shapeOf},
	// The rules that need a run, then those that see what all others
	// found.
	{"run rules", true, runRules},
	{"symptom rules", true, symptomRules},
	// The findings whose counters moved with the throughput's shape.
	{"tie shape", false, func(d *diagnosis) { tieShape(d.found, d.shape) }},
	// Causes related to their symptoms and listed first (relate.go).
	{"relate", false, func(d *diagnosis) { d.found = relate(d.found) }},
	// The share of a run's failed requests each cause accounts for.
	{"explain", false, func(d *diagnosis) {
		if d.run != nil {
			explain(d.found, d.run.Load, d.run.Port)
		}
	}},
	// A run's causes, the most harmful first.
	{"rank", false, func(d *diagnosis) {
		if d.run != nil {
			d.found = rank(d.found, d.run.Load)
		}
	}},
}

// diagnose runs the passes over d and returns the findings in report
// order with the run's throughput shape.
func diagnose(d *diagnosis) ([]report.Finding, report.Shape) {
	if d.rules == nil {
		d.rules = Registry
	}
	for _, p := range passes {
		p.do(d)
	}
	if len(d.found) == 0 {
		return nil, d.shape
	}
	return d.found, d.shape
}

// Diagnose diagnoses a run: every rule over both sides, the load and the
// servers, then the passes that look across findings (passes).
func Diagnose(r *evidence.Run) ([]report.Finding, report.Shape) {
	return diagnose(&diagnosis{run: r})
}

// CheckHost is what check, diagnose and the agent report: the same
// diagnosis over one namespace's bundle and the dependencies traced in
// it under the host's own traffic, whose passes that need a run do
// nothing. A dependency's own finding (its queue overflowing, its own
// pool saturated) is named as the cause of the wait its clients show,
// across any number of servers. The servers' profile over the window,
// when p has one, is judged too (Rule.Profiled). Nothing to read has no
// findings.
func CheckHost(b *evidence.Bundle, t *evidence.Traced, p *evidence.HostProfile) []report.Finding {
	fs, _ := diagnose(&diagnosis{bundle: b, traced: t, profile: p})
	return fs
}

// Check is CheckHost without traced dependencies: a bundle's diagnosis.
func Check(b *evidence.Bundle) []report.Finding { return CheckHost(b, nil, nil) }

// namespaceRules runs the PerSide and PerHost rules on check's bundle,
// or on each observed side of a run over its load window, each host's
// host-wide evidence judged once. Each namespace's findings come sorted.
func namespaceRules(d *diagnosis) {
	if d.run == nil {
		if d.bundle != nil && len(d.bundle.Snapshots) > 0 {
			d.found = append(d.found, report.Sort(namespaceFindings(&Input{Bundle: d.bundle}, d.rules, nil))...)
		}
		return
	}
	r := d.run
	judged := map[string]bool{}
	for _, s := range observed(r) {
		name := sideName(s)
		in := &Input{Bundle: r.Window(s), Side: name, Run: r}
		if len(in.Bundle.Snapshots) == 0 {
			continue
		}
		side := namespaceFindings(in, d.rules, judged)
		for i := range side {
			side[i].Side = name
		}
		d.found = append(d.found, report.Sort(side)...)
	}
}

// namespaceFindings runs the PerSide and PerHost rules on one namespace.
// judged holds, by "rule hostname", the host-wide evidence that made
// findings already on another namespace of the host (nil: one
// namespace).
func namespaceFindings(in *Input, rules []Rule, judged map[string]bool) []report.Finding {
	var out []report.Finding
	for _, rule := range rules {
		if rule.Scope != PerSide && rule.Scope != PerHost {
			continue
		}
		host := rule.Name + " " + in.Bundle.Host.Hostname
		if rule.Scope == PerHost && judged[host] {
			continue
		}
		found := rule.Check(in)
		if rule.Scope == PerHost && len(found) > 0 && judged != nil {
			judged[host] = true
		}
		out = append(out, found...)
	}
	return out
}

// observed are a run's sides with evidence, each bundle once (a server
// sharing the client's namespace is one).
func observed(r *evidence.Run) []*evidence.RunSide {
	var out []*evidence.RunSide
	seen := map[*evidence.Bundle]bool{}
	for _, s := range r.Sides {
		if s.Observed && s.Bundle != nil && !seen[s.Bundle] {
			seen[s.Bundle] = true
			out = append(out, s)
		}
	}
	return out
}

// sideName is the side a side's findings carry: Local for a server in
// the client's namespace.
func sideName(s *evidence.RunSide) report.Side {
	if s.SameAs != "" {
		return report.Local
	}
	return s.Name
}

// baselines judges each side's findings against its quiet baseline
// (baseline).
func baselines(d *diagnosis) {
	if d.run == nil {
		return
	}
	for _, s := range observed(d.run) {
		baseline(d.found, s.Bundle, d.run.LoadStart, sideName(s), d.run.Load)
	}
}

// tracedRules runs, without a run, the rules that judge the
// dependencies traced under the host's own traffic (Rule.Traced) on
// them; in a run, those rules judge the run's own trace.
func tracedRules(d *diagnosis) {
	profiled := d.profile != nil && d.profile.Profile != nil
	if d.run != nil || d.traced == nil && !profiled {
		return
	}
	in := &Input{Bundle: d.bundle, Traced: d.traced, Profile: d.profile}
	for _, rule := range d.rules {
		if rule.Traced && d.traced != nil || rule.Profiled && profiled {
			d.found = append(d.found, rule.Check(in)...)
		}
	}
}

// shapeOf is the throughput's shape over a run's load, tied to the
// first observed side's counters.
func shapeOf(d *diagnosis) {
	r := d.run
	if r == nil || r.Load == nil {
		return
	}
	if s := observed(r); len(s) > 0 {
		d.shape = analyse(r.Load.Timeline, r.Window(s[0]))
	}
}

// runRules runs the rules that need a run.
func runRules(d *diagnosis) {
	if d.run == nil {
		return
	}
	for _, rule := range d.rules {
		if rule.Scope == PerRun {
			d.found = append(d.found, rule.Check(&Input{Run: d.run, Shape: d.shape})...)
		}
	}
}

// symptomRules runs the rules that see what every other rule found, and
// what they looked at clean.
func symptomRules(d *diagnosis) {
	if d.run == nil {
		return
	}
	for _, rule := range d.rules {
		if rule.Scope == Symptom {
			cl, rose := clean(d.found, d.run)
			d.found = append(d.found, rule.Check(&Input{Run: d.run, Found: d.found, Shape: d.shape, Clean: cl, Rose: rose})...)
		}
	}
}

// clean lists what the registry's rules looked at and found nothing
// active in, exactly: not a rule whose watched counters rose on a side
// without a finding (those are in rose, with the counters), nor one that
// had nothing to look at (the dependencies when no server's connections
// were traced, the drop monitor's rules without it, the CPU rules when no
// server's threads were accounted).
func clean(found []report.Finding, r *evidence.Run) (clean, rose []string) {
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
func looked(r *evidence.Run, looks func(*evidence.Snapshot) bool) bool {
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
func watched(r *evidence.Run, counters []string) []string {
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
func accounted(r *evidence.Run) bool {
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
func traced(r *evidence.Run) bool {
	for _, s := range r.Servers {
		if len(s.Deps) > 0 {
			return true
		}
	}
	return false
}
