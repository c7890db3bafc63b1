package capacity

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/tune"
)

// applyBudget is the time kept for applying the plan and rolling it
// back, out of the budget the two searches share.
const applyBudget = 10 * time.Second

// Verify is capacity --verify-with: tune's one verification workflow
// (tune.Try: measure, apply, measure again, roll back, Ctrl-C included)
// with a search as the measurement, always rolled back: the capacity
// before → after. o.MaxDuration bounds the whole, each search taking
// half of what applying leaves. Progress goes to out.
func Verify(ctx context.Context, o Options, plan *tune.Plan, planPath string, out io.Writer) (*Verified, error) {
	if o.MaxDuration == 0 {
		o.MaxDuration = 2 * time.Minute
	}
	each := (o.MaxDuration - applyBudget) / 2
	if each < minBudget {
		return nil, fmt.Errorf("%w: --max-duration %v leaves %v for each of the two searches of --verify-with: at least %v", ErrBudget, o.MaxDuration, max(each, 0), minBudget)
	}
	o.MaxDuration = each
	tr, err := tune.Try(ctx, plan, planPath, tune.Trial[*Result]{
		Measure: func(ctx context.Context, step string) (*Result, error) {
			fmt.Fprintf(out, "%s:\n", step)
			res, err := Search(ctx, o)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "  %s\n", res.Report.Verdict)
			return res, nil
		},
		Does: "search", Out: out,
	})
	if err != nil {
		return nil, err
	}
	v := &report.CapacityVerify{Version: report.Version, Command: "capacity", Plan: planPath, Before: tr.Before.Report, After: tr.After.Report}
	if b := tr.Before.Report.CapacityRPS; b > 0 {
		v.Change = tr.After.Report.CapacityRPS / b
	}
	return &Verified{Report: v, Before: tr.Before, After: tr.After}, nil
}
