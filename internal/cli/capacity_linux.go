package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/tune"
)

// capacityVerify is capacity --verify-with: the capacity before → after
// the plan, which is always rolled back.
func capacityVerify(ctx context.Context, o capacity.Options, planPath, jsonOut, htmlOut string, failBelow float64, stdout, stderr, text io.Writer) error {
	plan, err := readPlan(planPath)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return deniedError{tune.ErrNotRoot}
	}
	v, err := capacity.Verify(ctx, o, plan, planPath, text)
	if err != nil {
		if errors.Is(err, tune.ErrNotRoot) {
			return deniedError{err}
		}
		return capacityErr(err)
	}
	r := v.Report
	if jsonOut != "-" {
		for _, c := range []struct {
			name string
			c    *report.Capacity
		}{{"Before", r.Before}, {"After", r.After}} {
			fmt.Fprintf(stdout, "\n%s the plan:\n", c.name)
			if err := report.CapacityText(stdout, c.c); err != nil {
				return err
			}
		}
		if err := report.CapacityVerifyText(stdout, r); err != nil {
			return err
		}
	}
	if jsonOut != "" {
		if err := writeOut(jsonOut, stdout, "report", indentedJSON(r)); err != nil {
			return err
		}
	}
	if htmlOut != "" {
		// One page per search: the after page beside the named one.
		for _, c := range []struct {
			path string
			c    *report.Capacity
		}{{htmlOut, r.Before}, {afterPath(htmlOut), r.After}} {
			if err := writeOut(c.path, stdout, "HTML report", func(w io.Writer) error { return report.CapacityHTML(w, c.c) }); err != nil {
				return err
			}
		}
	}
	return belowCapacity(r.After, failBelow, stderr)
}
