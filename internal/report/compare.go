package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"
)

// CompareText writes two runs (or loads) side by side: the load's figures
// with the change, then the findings gone, new and in both. Each is
// named by its path.
func CompareText(w io.Writer, aPath string, a *Run, bPath string, b *Run) error {
	p := &printer{w: w}
	p.f("netdoctor compare: %s → %s\n\n", aPath, bPath)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name, x, y, change string) { fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, x, y, change) }
	row("", "before", "after", "change")
	la, lb := a.Load, b.Load
	row("requests/s", fmt.Sprintf("%.0f", la.RPS), fmt.Sprintf("%.0f", lb.RPS), ratio(la.RPS, lb.RPS))
	for _, q := range []struct {
		name string
		x, y time.Duration
	}{{"p50", la.Latency.P50, lb.Latency.P50}, {"p99", la.Latency.P99, lb.Latency.P99}, {"max", la.Latency.Max, lb.Latency.Max}} {
		row("latency "+q.name, Dur(q.x), Dur(q.y), ratio(float64(q.x), float64(q.y)))
	}
	for _, e := range []struct {
		name string
		x, y uint64
	}{{"connect errors", la.Errors.Connect, lb.Errors.Connect}, {"read errors", la.Errors.Read, lb.Errors.Read},
		{"write errors", la.Errors.Write, lb.Errors.Write}, {"timeouts", la.Errors.Timeout, lb.Errors.Timeout},
		{"non-2xx/3xx", la.Requests - la.Status["2xx"] - la.Status["3xx"], lb.Requests - lb.Status["2xx"] - lb.Status["3xx"]}} {
		row(e.name, fmt.Sprint(e.x), fmt.Sprint(e.y), fmt.Sprintf("%+d", int64(e.y)-int64(e.x)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	key := func(f Finding) string { return fmt.Sprintf("%s %s %s %s", f.ID, f.Subject, f.Side, f.Status) }
	before, after := map[string]Finding{}, map[string]Finding{}
	for _, f := range a.Findings {
		before[key(f)] = f
	}
	for _, f := range b.Findings {
		after[key(f)] = f
	}
	section := func(title string, fs []Finding, other map[string]Finding) {
		p.f("\n%s:\n", title)
		n := 0
		for _, f := range fs {
			if _, ok := other[key(f)]; !ok {
				p.f("  [%s %s] %s (%s)\n", f.Severity, f.Status, f.Title, f.ID)
				n++
			}
		}
		if n == 0 {
			p.f("  none\n")
		}
	}
	section("Findings gone", a.Findings, after)
	section("Findings new", b.Findings, before)
	section("Findings in both", intersect(a.Findings, after, key), nil)
	return p.err
}

func intersect(fs []Finding, other map[string]Finding, key func(Finding) string) []Finding {
	var out []Finding
	for _, f := range fs {
		if _, ok := other[key(f)]; ok {
			out = append(out, f)
		}
	}
	return out
}

func ratio(x, y float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("×%.2f", y/x)
}
