package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// CompareText writes two reports side by side: the load's figures with
// the change when both have a load (run and load reports), then the
// findings gone, new and in both. Each is named by its path. A check or
// diagnose report has no sides: against one, findings are matched
// without theirs.
func CompareText(w io.Writer, aPath string, a *Run, bPath string, b *Run) error {
	p := &printer{w: w}
	p.f("netdoctor compare: %s → %s\n", aPath, bPath)
	switch {
	case a.Load != nil && b.Load != nil:
		p.f("\n")
		if err := compareLoad(w, a.Load, b.Load); err != nil {
			return err
		}
	case a.Load != nil || b.Load != nil:
		p.f("\nLoad: only %s has one (%s vs %s report): findings only\n", map[bool]string{true: aPath, false: bPath}[a.Load != nil], a.Command, b.Command)
	}
	if a.Status != "" || b.Status != "" {
		p.f("\nStatus: %s → %s\n", orDash(string(a.Status)), orDash(string(b.Status)))
	}
	sides := sided(a) && sided(b)
	key := func(f Finding) string {
		if !sides {
			return fmt.Sprintf("%s %s %s", f.ID, f.Subject, f.Status)
		}
		return fmt.Sprintf("%s %s %s %s", f.ID, f.Subject, f.Side, f.Status)
	}
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
