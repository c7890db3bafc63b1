package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// compared is what compare reads from a `run --json` or `load --json`
// report.
type compared struct {
	path     string
	load     *load.Result
	findings []report.Finding
}

func readCompared(path string) (*compared, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, badInput("read report: %v", err)
	}
	var top struct {
		Version  int              `json:"version"`
		Command  string           `json:"command"`
		Findings []report.Finding `json:"findings"`
		Load     *load.Result     `json:"load"`
	}
	if err := json.Unmarshal(b, &top); err != nil || top.Version != 1 {
		return nil, badInput("read report %s: not a netdoctor run or load report (version 1)", path)
	}
	c := &compared{path: path, findings: top.Findings, load: top.Load}
	if c.load == nil && top.Command == "load" {
		c.load = &load.Result{}
		if err := json.Unmarshal(b, c.load); err != nil {
			return nil, badInput("read report %s: %v", path, err)
		}
	}
	if c.load == nil {
		return nil, badInput("read report %s: it has no load results (compare takes run or load reports)", path)
	}
	return c, nil
}

func runCompare(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", stderr)
	pos, err := parse(fs, args, stderr)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		return badInput("compare needs two reports: netdoctor compare before.json after.json")
	}
	a, err := readCompared(pos[0])
	if err != nil {
		return err
	}
	b, err := readCompared(pos[1])
	if err != nil {
		return err
	}
	return writeCompare(stdout, a, b)
}

func writeCompare(w io.Writer, a, b *compared) error {
	p := &printer{w: w}
	p.f("netdoctor compare: %s → %s\n\n", a.path, b.path)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	row := func(name, x, y, change string) { fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", name, x, y, change) }
	row("", "before", "after", "change")
	la, lb := a.load, b.load
	row("requests/s", fmt.Sprintf("%.0f", la.RPS), fmt.Sprintf("%.0f", lb.RPS), ratio(la.RPS, lb.RPS))
	for _, q := range []struct {
		name string
		x, y time.Duration
	}{{"p50", la.Latency.P50, lb.Latency.P50}, {"p99", la.Latency.P99, lb.Latency.P99}, {"max", la.Latency.Max, lb.Latency.Max}} {
		row("latency "+q.name, dur(q.x), dur(q.y), ratio(float64(q.x), float64(q.y)))
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
	key := func(f report.Finding) string { return fmt.Sprintf("%s %s %s %s", f.ID, f.Subject, f.Side, f.Status) }
	before, after := map[string]report.Finding{}, map[string]report.Finding{}
	for _, f := range a.findings {
		before[key(f)] = f
	}
	for _, f := range b.findings {
		after[key(f)] = f
	}
	section := func(title string, fs []report.Finding, other map[string]report.Finding) {
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
	section("Findings gone", a.findings, after)
	section("Findings new", b.findings, before)
	section("Findings in both", intersect(a.findings, after, key), nil)
	return p.err
}

func intersect(fs []report.Finding, other map[string]report.Finding, key func(report.Finding) string) []report.Finding {
	var out []report.Finding
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
