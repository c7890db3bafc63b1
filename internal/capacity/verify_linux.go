package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/tune"
)

// applyBudget is the time kept for applying the plan and rolling it
// back, out of the budget the two searches share.
const applyBudget = 10 * time.Second

// Verify searches, applies the plan (tune.Apply: a journal first, every
// configuration validated and reloaded), searches again with the same
// load and SLO, and always rolls the plan back, Ctrl-C included: the
// capacity before → after. o.MaxDuration bounds the whole, each search
// taking half of what applying leaves. Progress goes to out.
func Verify(ctx context.Context, o Options, plan *tune.Plan, planPath string, out io.Writer) (*Verified, error) {
	if o.MaxDuration == 0 {
		o.MaxDuration = 2 * time.Minute
	}
	each := (o.MaxDuration - applyBudget) / 2
	if each < minBudget {
		return nil, fmt.Errorf("%w: --max-duration %v leaves %v for each of the two searches of --verify-with: at least %v", ErrBudget, o.MaxDuration, max(each, 0), minBudget)
	}
	o.MaxDuration = each
	fmt.Fprintf(out, "Verifying %s (%d changes): search, apply, search again with the same load, roll back\n\n1/3 before:\n", planPath, len(plan.Changes))
	before, err := Search(ctx, o)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  %s\n\n2/3 applying %s (kernel settings and configuration):\n", before.Report.Verdict, planPath)
	j, err := tune.Apply(ctx, plan, planPath, tune.Options{Config: true, Out: out})
	if err != nil {
		return nil, err
	}
	rolledBack := false
	rollback := func() error {
		if j == nil || rolledBack {
			return nil
		}
		rolledBack = true
		fmt.Fprintf(out, "\nRolling back:\n")
		if err := tune.Rollback(j, out); err != nil {
			return fmt.Errorf("rollback: %w (journal %s)", err, j.Path)
		}
		return tune.Forget(j)
	}
	defer rollback()
	fmt.Fprintf(out, "\n3/3 after:\n")
	after, err := Search(ctx, o)
	if rerr := rollback(); rerr != nil {
		return nil, errors.Join(err, rerr)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  %s\n", after.Report.Verdict)
	v := &report.CapacityVerify{Version: report.Version, Command: "capacity", Plan: planPath, Before: before.Report, After: after.Report}
	if b := before.Report.CapacityRPS; b > 0 {
		v.Change = after.Report.CapacityRPS / b
	}
	return &Verified{Report: v, Before: before, After: after}, nil
}
