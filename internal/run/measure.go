package run

import (
	"context"

	"github.com/netdoctor/netdoctor/internal/tune"
)

// Measure is tune.Verify's measurement by runs (run --verify-with, and
// the lab's --tune): each step runs o again, the identical load, and
// gives the run's report and what tune.Judge compares of it. begin, if
// set, is called as each step starts, with its name and the options it
// runs, which it may give hooks (the command's progress); what it
// returns is called once the run has ended.
func Measure(o Options, begin func(step string, o *Options) (end func())) func(ctx context.Context, step string) (*tune.Measured, error) {
	return func(ctx context.Context, step string) (*tune.Measured, error) {
		o := o
		end := func() {}
		if begin != nil {
			end = begin(step, &o)
		}
		res, err := Run(ctx, o)
		end()
		if err != nil {
			return nil, err
		}
		// Each measurement runs the script as a run does: its own setup
		// and init (in Run), and its done, printed after the load.
		if res.Load != nil {
			if err := res.Load.ScriptDone(); err != nil {
				return nil, err
			}
		}
		return &tune.Measured{Report: res.Report(), Outcome: res.Outcome()}, nil
	}
}

// Outcome is what tune.Judge compares of a run: its findings, and its
// server side's counter rates over the load window (the client's when
// the server was not observed).
func (res *Result) Outcome() tune.Outcome {
	o := tune.Outcome{Findings: res.Findings}
	for _, s := range res.Sides {
		if !s.Observed {
			continue
		}
		if w, ok := res.Window(s).Window(); ok {
			o.Rate = w.SourceRate
			break
		}
	}
	return o
}
