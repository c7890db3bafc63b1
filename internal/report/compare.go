package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// Diff is what changed between two reports' findings, each matched by
// its ID, subject and (between two runs) side: gone, new, changed in
// status or severity (latent → active is a change, not a finding gone
// and one new), and the same.
type Diff struct {
	Gone, New, Same []Finding
	Changed         []Change
}

// Change is a finding in both reports whose status or severity moved.
type Change struct{ Before, After Finding }

// Worse reports a change that hurts more after: latent → active, or a
// severity that rose.
func (c Change) Worse() bool {
	return c.Before.Status == Latent && c.After.Status == Active || MoreSevere(c.After.Severity, c.Before.Severity)
}

// Match matches two reports' findings. A check or diagnose report has
// no sides: against one, findings are matched without theirs.
func Match(a, b *Run) Diff {
	sides := sided(a) && sided(b)
	key := func(f Finding) string {
		if !sides {
			return fmt.Sprintf("%s %s", f.ID, f.Subject)
		}
		return fmt.Sprintf("%s %s %s", f.ID, f.Subject, f.Side)
	}
	before := map[string]Finding{}
	for _, f := range a.Findings {
		before[key(f)] = f
	}
	var d Diff
	seen := map[string]bool{}
	for _, f := range b.Findings {
		k := key(f)
		seen[k] = true
		switch old, ok := before[k]; {
		case !ok:
			d.New = append(d.New, f)
		case old.Status != f.Status || old.Severity != f.Severity:
			d.Changed = append(d.Changed, Change{Before: old, After: f})
		default:
			d.Same = append(d.Same, f)
		}
	}
	for _, f := range a.Findings {
		if !seen[key(f)] {
			d.Gone = append(d.Gone, f)
		}
	}
	return d
}

// Regressions are the findings active after that hurt more than before
// (new, once latent, or more severe), at least as severe as least.
func (d Diff) Regressions(least Severity) []Finding {
	var out []Finding
	hurts := func(f Finding) bool { return f.Status == Active && !MoreSevere(least, f.Severity) }
	for _, f := range d.New {
		if hurts(f) {
			out = append(out, f)
		}
	}
	for _, c := range d.Changed {
		if c.Worse() && hurts(c.After) {
			out = append(out, c.After)
		}
	}
	return out
}

// CompareText writes two reports side by side: the load's figures with
// the change when both have a load (run and load reports), then the
// findings gone, new, changed (latent → active, warning → critical and
// back) and in both. Each is named by its path.
func CompareText(w io.Writer, aPath string, a *Run, bPath string, b *Run) error {
	p := NewPrinter(w)
	p.F("netdoctor compare: %s → %s\n", aPath, bPath)
	switch {
	case a.Load != nil && b.Load != nil:
		p.F("\n")
		if err := compareLoad(w, a.Load, b.Load); err != nil {
			return err
		}
	case a.Load != nil || b.Load != nil:
		p.F("\nLoad: only %s has one (%s vs %s report): findings only\n", map[bool]string{true: aPath, false: bPath}[a.Load != nil], a.Command, b.Command)
	}
	if a.Status != "" || b.Status != "" {
		p.F("\nStatus: %s → %s\n", orDash(string(a.Status)), orDash(string(b.Status)))
	}
	d := Match(a, b)
	section := func(title string, fs []Finding) {
		p.F("\n%s:\n", title)
		for _, f := range fs {
			p.F("  [%s %s] %s (%s)\n", f.Severity, f.Status, f.Title, f.ID)
		}
		if len(fs) == 0 {
			p.F("  none\n")
		}
	}
	section("Findings gone", d.Gone)
	section("Findings new", d.New)
	p.F("\nFindings changed:\n")
	for _, c := range d.Changed {
		p.F("  [%s %s → %s %s] %s (%s)\n", c.Before.Severity, c.Before.Status, c.After.Severity, c.After.Status, c.After.Title, c.After.ID)
	}
	if len(d.Changed) == 0 {
		p.F("  none\n")
	}
	section("Findings in both", d.Same)
	return p.Err()
}

// compareLoad writes the table of the two loads' figures.
func compareLoad(w io.Writer, la, lb *load.Result) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name, x, y, change string) { fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, x, y, change) }
	row("", "before", "after", "change")
	for _, r := range LikeWithLike(la, lb) {
		row(r.Name, r.Before, r.After, r.Change)
	}
	row("requests/s, answered", fmt.Sprintf("%.0f", la.RPS), fmt.Sprintf("%.0f", lb.RPS), ratio(la.RPS, lb.RPS))
	if la.LatencyAll != nil && lb.LatencyAll != nil {
		for _, q := range []struct {
			name string
			x, y time.Duration
		}{{"p50", la.Latency.P50, lb.Latency.P50}, {"p99", la.Latency.P99, lb.Latency.P99}} {
			row("latency "+q.name+", answered only", Dur(q.x), Dur(q.y), ratio(float64(q.x), float64(q.y)))
		}
	}
	for _, e := range []struct {
		name string
		x, y uint64
	}{{"connect errors", la.Errors.Connect, lb.Errors.Connect}, {"read errors", la.Errors.Read, lb.Errors.Read},
		{"write errors", la.Errors.Write, lb.Errors.Write}, {"timeouts", la.Errors.Timeout, lb.Errors.Timeout},
		{"non-2xx/3xx", la.Requests - la.Status["2xx"] - la.Status["3xx"], lb.Requests - lb.Status["2xx"] - lb.Status["3xx"]}} {
		row(e.name, fmt.Sprint(e.x), fmt.Sprint(e.y), fmt.Sprintf("%+d", int64(e.y)-int64(e.x)))
	}
	return tw.Flush()
}

// sided reports a report whose findings carry the side they were seen
// on: a run's or a load's, not a check's or a diagnosis's of a bundle.
func sided(r *Run) bool { return r.Command == "run" || r.Command == "load" }

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func ratio(x, y float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("×%.2f", y/x)
}
