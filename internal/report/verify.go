package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/netdoctor/netdoctor/internal/load"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Verify is the JSON of `run --verify-with`: both runs, what each change
// of the plan did, and the journal of the changes when they were kept.
type Verify struct {
	Plan     string    `json:"plan"`
	Before   *Run      `json:"before"`
	After    *Run      `json:"after"`
	Verdicts []Verdict `json:"verdicts"`
	Journal  string    `json:"journal,omitempty"`
	Kept     bool      `json:"kept"`
}

// Verdict is what one change did to the findings it targets: "fixed",
// "improved", "no effect", "worse" or "not judged" (internal/tune).
type Verdict struct {
	Change  string   `json:"change"`
	Key     string   `json:"key"`
	Verdict string   `json:"verdict"`
	Before  []string `json:"before"` // each target as the first run saw it
	After   []string `json:"after"`
	Note    string   `json:"note,omitempty"`
}

// VerifyText writes the two runs of a verification side by side and
// each change's verdict.
func VerifyText(w io.Writer, before, after *Run, vs []Verdict) error {
	w = printable.NewWriter(w)
	fmt.Fprintf(w, "\nBefore → after:\n")
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	row := func(name string, f func(*Run) string) {
		fmt.Fprintf(tw, "  %s\t%s\t→ %s\n", name, f(before), f(after))
	}
	lr := func(f func(*load.Result) string) func(*Run) string {
		return func(r *Run) string {
			if r.Load == nil {
				return "-"
			}
			return f(r.Load)
		}
	}
	if before.Load != nil && after.Load != nil {
		// Like with like first: goodput, success share, and the
		// latency of every request, failed ones included.
		for _, r := range LikeWithLike(before.Load, after.Load) {
			if !strings.HasPrefix(r.Name, "latency max") {
				fmt.Fprintf(tw, "  %s\t%s\t→ %s\n", r.Name, r.Before, r.After)
			}
		}
	}
	row("requests/s, answered", lr(func(l *load.Result) string { return fmt.Sprintf("%.0f", l.RPS) }))
	row("errors", lr(func(l *load.Result) string {
		e := l.Errors
		return fmt.Sprintf("connect %d, read %d, write %d, timeout %d", e.Connect, e.Read, e.Write, e.Timeout)
	}))
	row("non-2xx", lr(func(l *load.Result) string {
		var parts []string
		for _, k := range []string{"1xx", "3xx", "4xx", "5xx"} {
			if n := l.Status[k]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", k, n))
			}
		}
		if len(parts) == 0 {
			return "none"
		}
		return strings.Join(parts, ", ")
	}))
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "  before: %s\n  after:  %s\n", printable.String(before.Verdict), printable.String(after.Verdict))
	fmt.Fprintf(w, "\nEach change:\n")
	for i, v := range vs {
		fmt.Fprintf(w, "  %d. %s: %s\n", i+1, strings.ToUpper(v.Verdict), printable.String(v.Change))
		if v.Note != "" {
			fmt.Fprintf(w, "       (%s)\n", printable.String(v.Note))
		}
		for k := range v.Before {
			fmt.Fprintf(w, "       %s\n         → %s\n", printable.String(v.Before[k]), printable.String(strings.TrimPrefix(v.After[k], strings.SplitN(v.After[k], ": ", 2)[0]+": ")))
		}
	}
	return nil
}
