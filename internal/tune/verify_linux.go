package tune

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/netdoctor/netdoctor/internal/report"
)

// Trial is how a plan is verified, whatever measures it: a run of the
// same load (Verify, with run.Measure) or a capacity search
// (capacity.Verify). Try runs it.
type Trial[M any] struct {
	// Measure measures once, the same way before and after the plan;
	// step names the step ("1/3 before", "3/3 after"), and the
	// measurement says it where its progress begins. Its errors are
	// returned as they are.
	Measure func(ctx context.Context, step string) (M, error)
	// Compare, if set, judges both measurements while the plan is still
	// applied (the verdicts), so that what it writes comes before the
	// rollback's lines.
	Compare func(before, after M) error
	// Does is what one measurement does, for the first line: "measure",
	// "search".
	Does string
	// Keep keeps the changes instead of rolling them back; CanKeep says
	// that the command could (run --keep), which the rollback mentions.
	Keep, CanKeep bool
	// Out is where the steps, the changes and the rollback are written.
	Out io.Writer
}

// Tried is a finished trial: both measurements, and the journal that
// undoes the kept changes (Trial.Keep), "" when they were rolled back.
type Tried[M any] struct {
	Before, After M
	Journal       string
}

// Try is the one verification workflow: measure, apply p (kernel
// settings and configuration, tune.Apply: a journal first, every
// configuration validated and reloaded), measure again the same way,
// compare, and roll back unless t.Keep. The rollback happens on every
// way out once the plan is applied, a cancelled ctx included (the
// measurement returns early; the rollback does not take ctx), and the
// journal is forgotten once everything is back.
func Try[M any](ctx context.Context, p *Plan, planPath string, t Trial[M]) (*Tried[M], error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	out := t.Out
	end := "roll back"
	if t.Keep {
		end = "keep the changes"
	}
	fmt.Fprintf(out, "Verifying %s (%d changes): %s, apply, %s again with the same load, %s\n\n", planPath, len(p.Changes), t.Does, t.Does, end)
	before, err := t.Measure(ctx, "1/3 before")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "\n2/3 applying %s (kernel settings and configuration):\n", planPath)
	j, err := Apply(ctx, p, planPath, Options{Config: true, Out: out})
	if err != nil {
		return nil, err
	}
	rolledBack := false
	rollback := func() error {
		if j == nil || t.Keep || rolledBack {
			return nil
		}
		rolledBack = true
		if t.CanKeep {
			fmt.Fprintf(out, "\nRolling back (--keep keeps the changes):\n")
		} else {
			fmt.Fprintf(out, "\nRolling back:\n")
		}
		if err := Rollback(j, out); err != nil {
			return fmt.Errorf("rollback: %w (journal %s)", err, j.Path)
		}
		// Everything is back: the journal has served.
		return Forget(j)
	}
	defer rollback()
	fmt.Fprintln(out)
	after, err := t.Measure(ctx, "3/3 after")
	if err == nil && t.Compare != nil {
		err = t.Compare(before, after)
	}
	if rerr := rollback(); rerr != nil {
		if err != nil {
			return nil, fmt.Errorf("%w; %w", err, rerr)
		}
		return nil, rerr
	}
	if err != nil {
		return nil, err
	}
	res := &Tried[M]{Before: before, After: after}
	if j != nil && t.Keep {
		fmt.Fprintf(out, "\nChanges kept. Undo: netdoctor tune rollback %s\n", j.Path)
		res.Journal = j.Path
	}
	return res, nil
}

// VerifyOptions say how Verify measures, and where it reports.
type VerifyOptions struct {
	// Measure runs the identical load once and diagnoses it (run.Measure);
	// step names the step ("1/3 before", "3/3 after").
	Measure func(ctx context.Context, step string) (*Measured, error)
	// Keep keeps the changes instead of rolling them back.
	Keep bool
	// Out is where the steps, the changes and the verdicts are written.
	Out io.Writer
}

// Verify is run --verify-with: Try with runs of the same load, each
// change of the plan judged on the findings it targets (Judge): the
// seeds' "change one setting, load again, compare" for every change of
// the plan at once.
func Verify(ctx context.Context, p *Plan, planPath string, o VerifyOptions) (*report.Verify, error) {
	var vs []report.Verdict
	tr, err := Try(ctx, p, planPath, Trial[*Measured]{
		Measure: o.Measure,
		Compare: func(before, after *Measured) error {
			vs = Judge(p, before.Outcome, after.Outcome)
			return report.VerifyText(o.Out, before.Report, after.Report, vs)
		},
		Does: "measure", Keep: o.Keep, CanKeep: true, Out: o.Out,
	})
	if err != nil {
		return nil, err
	}
	return &report.Verify{Plan: planPath, Before: tr.Before.Report, After: tr.After.Report, Verdicts: vs, Kept: o.Keep, Journal: tr.Journal}, nil
}
