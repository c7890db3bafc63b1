package tune

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/netdoctor/netdoctor/internal/report"
)

// Measured is one measurement of a verification: the run's report and
// what Judge compares of it.
type Measured struct {
	Report  *report.Run
	Outcome Outcome
}

// VerifyOptions say how Verify measures, and where it reports.
type VerifyOptions struct {
	// Measure runs the identical load once and diagnoses it; what names
	// the step ("1/3 before", "3/3 after"). Its errors are returned as
	// they are.
	Measure func(ctx context.Context, what string) (*Measured, error)
	// Keep keeps the changes instead of rolling them back.
	Keep bool
	// Out is where the steps, the changes and the verdicts are written.
	Out io.Writer
}

// Verify measures, applies p (kernel settings and configuration),
// measures again with the same load and rolls back unless o.Keep: the
// seeds' "change one setting, load again, compare" for every change of
// the plan at once. The rollback happens on every way out, a cancelled
// ctx included (the measurement returns early; the rollback does not
// take ctx).
func Verify(ctx context.Context, p *Plan, planPath string, o VerifyOptions) (*report.Verify, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	text := o.Out
	keep := o.Keep
	measure := o.Measure
	fmt.Fprintf(text, "Verifying %s (%d changes): measure, apply, measure again with the same load, %s\n\n", planPath, len(p.Changes), map[bool]string{true: "keep the changes", false: "roll back"}[keep])
	before, err := measure(ctx, "1/3 before")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(text, "\n2/3 applying %s (kernel settings and configuration):\n", planPath)
	j, err := Apply(ctx, p, planPath, Options{Config: true, Out: text})
	if err != nil {
		return nil, err
	}
	rolledBack := false
	rollback := func() error {
		if j == nil || keep || rolledBack {
			return nil
		}
		rolledBack = true
		fmt.Fprintf(text, "\nRolling back (--keep keeps the changes):\n")
		if err := Rollback(j, text); err != nil {
			return err
		}
		// Everything is back: the journal has served.
		return Forget(j)
	}
	defer rollback()
	fmt.Fprintln(text)
	after, err := measure(ctx, "3/3 after")
	if err != nil {
		if rerr := rollback(); rerr != nil {
			return nil, fmt.Errorf("%w; rollback: %v", err, rerr)
		}
		return nil, err
	}
	vs := Judge(p, before.Outcome, after.Outcome)
	rb, ra := before.Report, after.Report
	if err := report.VerifyText(text, rb, ra, vs); err != nil {
		return nil, err
	}
	if err := rollback(); err != nil {
		return nil, fmt.Errorf("rollback: %w (journal %s)", err, j.Path)
	}
	if j != nil && keep {
		fmt.Fprintf(text, "\nChanges kept. Undo: netdoctor tune rollback %s\n", j.Path)
	}
	vr := &report.Verify{Plan: planPath, Before: rb, After: ra, Verdicts: vs, Kept: keep}
	if j != nil && keep {
		vr.Journal = j.Path
	}
	return vr, nil
}
