package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/run"
	"github.com/netdoctor/netdoctor/internal/tune"
)

func runTuneCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badInput("tune needs a subcommand: plan REPORT.json, apply PLAN.json, rollback [JOURNAL]")
	}
	switch args[0] {
	case "plan":
		return tunePlan(args[1:], stdout, stderr)
	case "apply":
		return tuneApply(ctx, args[1:], stdout, stderr)
	case "rollback":
		return tuneRollback(args[1:], stdout, stderr)
	case "-h", "--help", "help":
		return subcommandHelp(stdout, "tune")
	}
	return badInput("tune: unknown subcommand %q (plan, apply, rollback)", args[0])
}

func tunePlan(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tune plan", stderr)
	out := fs.String("out", "", "write the plan as JSON to this file (\"-\": JSON to stdout instead of the text)")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("tune plan needs exactly one report, e.g. netdoctor tune plan before.json --out plan.json")
	}
	p, err := planFrom(pos[0])
	if err != nil {
		return err
	}
	if *out != "-" {
		if err := p.Text(stdout); err != nil {
			return err
		}
	}
	if *out != "" {
		return writeOut(*out, stdout, "plan", indentedJSON(p))
	}
	return nil
}

// planFrom reads a report and plans from it against the live host.
func planFrom(path string) (*tune.Plan, error) {
	f, err := openData(path)
	if err != nil {
		return nil, badInput("read report %s: %v", path, dataError(err))
	}
	defer f.Close()
	in, err := tune.ReadInput(f)
	if err != nil {
		return nil, readReportError(path, err)
	}
	return tune.Build(in, path, tune.Live{})
}

func readPlan(path string) (*tune.Plan, error) { return readWith(path, "plan", tune.ReadPlan) }

func tuneApply(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tune apply", stderr)
	var o tune.Options
	yes := fs.Bool("yes", false, "make the changes (without it apply only shows what would change)")
	ns := fs.String("netns", "", "apply per-namespace settings in this namespace instead of the plan's")
	fs.BoolVar(&o.Persist, "persist", false, "also write host-namespace settings to "+tune.PersistFile)
	fs.BoolVar(&o.Config, "config", false, "also write the configuration files, validate them and reload the applications")
	durationVar(fs, &o.StepDelay, "step-delay", 0, "pause between changes (for tests)")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("tune apply needs exactly one plan, e.g. netdoctor tune apply plan.json --yes")
	}
	p, err := readPlan(pos[0])
	if err != nil {
		return err
	}
	if o.NetNS, err = netns.Resolve(*ns); err != nil {
		return err
	}
	o.DryRun, o.Out = !*yes, stdout
	// Ctrl-C between two changes stops the apply, which then rolls back;
	// a change in progress finishes first.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	j, err := tune.Apply(ctx, p, pos[0], o)
	if err != nil {
		return tuneErr(err)
	}
	if j != nil {
		fmt.Fprintf(stdout, "Applied %d changes. Undo: netdoctor tune rollback %s\n", len(j.Entries), j.Path)
	}
	return nil
}

func tuneRollback(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tune rollback", stderr)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return badInput("tune rollback takes at most one journal")
	}
	if os.Geteuid() != 0 {
		return deniedError{tune.ErrNotRoot}
	}
	var js []*tune.Journal
	if len(pos) == 1 {
		j, err := tune.ReadJournal(pos[0])
		if err != nil {
			return usageError{err}
		}
		js = append(js, j)
	} else {
		// Every journal not yet rolled back, newest first: the host goes
		// back to before netdoctor changed it.
		if js, err = tune.Open(); err != nil {
			return err
		}
		if len(js) == 0 {
			fmt.Fprintf(stdout, "Nothing to roll back: no open journal in %s.\n", tune.JournalDir)
			return nil
		}
	}
	var errs []error
	for _, j := range js {
		if j.State == tune.StateRolledBack {
			fmt.Fprintf(stdout, "%s: already rolled back\n", j.Path)
			continue
		}
		fmt.Fprintf(stdout, "Rolling back %s (%s, %s, %d changes):\n", j.Path, j.State, j.Started.Local().Format(time.DateTime), len(j.Entries))
		if err := tune.Rollback(j, stdout); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func tuneErr(err error) error {
	switch {
	case errors.Is(err, tune.ErrNotRoot):
		return deniedError{err}
	case errors.Is(err, tune.ErrUnfinished):
		return usageError{err}
	}
	return err
}

// runVerify is run --verify-with: tune.Verify measuring with runs of
// j's load (run.Measure), each step's progress shown as a run's.
func runVerify(ctx context.Context, j runJob, stdout, stderr io.Writer) error {
	p, err := readPlan(j.verify)
	if err != nil {
		return err
	}
	// With --json - the progress goes to stderr: stdout is the JSON's.
	text := textOut(j.json, stdout, stderr)
	measure := run.Measure(j.o, func(step string, o *run.Options) func() {
		fmt.Fprintf(text, "%s: %s @ %s\n", step, describe(o.Load), o.Load.URL)
		pr := newProgress(stderr, o.Load.Duration, j.timed)
		o.Load.OnSecond = pr.second
		return pr.done
	})
	vr, err := tune.Verify(ctx, p, j.verify, tune.VerifyOptions{Measure: measure, Keep: j.keep, Out: text})
	if err != nil {
		return runErr(tuneErr(err))
	}
	if j.json != "" {
		if err := writeOut(j.json, stdout, "report", indentedJSON(vr)); err != nil {
			return err
		}
	}
	return exitFor(vr.After.Findings, j.fail)
}
