package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// readCompared reads a run, load, check or diagnose report for compare.
func readCompared(path string) (*report.Run, error) {
	f, err := openData(path)
	if err != nil {
		return nil, badInput("read report %s: %v", path, dataError(err))
	}
	defer f.Close()
	r, err := report.Read(f)
	if err != nil {
		return nil, readReportError(path, err)
	}
	return r, nil
}

func runCompare(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", stderr)
	fail := failCritical
	fs.Var(&fail, "fail-on", "exit 1 when the second report has a finding active that the first had not, or had latent or less severe, this severe or more: critical, warning, or never")
	pos, err := parse(fs, args, stdout)
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
	var left []string
	one := a.Command
	if oneSided(b) {
		one = b.Command
	}
	if oneSided(a) != oneSided(b) {
		// A check looks at one namespace's kernel: the findings only a
		// run's load and servers show are not compared with it.
		for _, r := range []*report.Run{a, b} {
			left = append(left, dropRunOnly(r)...)
		}
	}
	if err := report.CompareText(stdout, pos[0], a, pos[1], b); err != nil {
		return err
	}
	if len(left) > 0 {
		slices.Sort(left)
		left = slices.Compact(left)
		if _, err := fmt.Fprintf(stdout, "\nNot compared with the %s report (only a run's load and servers show them): %s\n", one, strings.Join(left, ", ")); err != nil {
			return err
		}
	}
	if fail == failNever {
		return nil
	}
	least := report.Critical
	if fail == failWarning {
		least = report.Warning
	}
	if worse := report.Match(a, b).Regressions(least); len(worse) > 0 {
		ids := make([]string, len(worse))
		for i, f := range worse {
			ids[i] = strings.TrimSpace(string(f.ID) + " " + f.Subject)
		}
		fmt.Fprintf(stderr, "netdoctor: regression: %s %s active in %s, not so in %s\n", strings.Join(ids, ", "), map[bool]string{true: "is", false: "are"}[len(ids) == 1], pos[1], pos[0])
		return errFindings
	}
	return nil
}

// oneSided reports a report of one namespace's snapshots: check and
// diagnose of a bundle.
func oneSided(r *report.Run) bool { return r.Command != "run" && r.Command != "load" }

// dropRunOnly removes from r the findings of the rules that need a run
// (PerRun, Symptom) and returns their IDs.
func dropRunOnly(r *report.Run) []string {
	runOnly := map[report.FindingID]bool{}
	for _, rule := range rules.Registry {
		if rule.Scope == rules.PerRun || rule.Scope == rules.Symptom {
			for _, id := range rule.IDs {
				runOnly[id] = true
			}
		}
	}
	var gone []string
	r.Findings = slices.DeleteFunc(slices.Clone(r.Findings), func(f report.Finding) bool {
		if runOnly[f.ID] {
			gone = append(gone, string(f.ID))
			return true
		}
		return false
	})
	return gone
}
