package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/tune"
)

// capacityVerify is capacity --verify-with: the capacity before → after
// the plan, which is always rolled back (capacity.Verify).
func capacityVerify(ctx context.Context, o capacity.Options, j capacityJob, stdout, stderr, text io.Writer) error {
	plan, err := readPlan(j.verify)
	if err != nil {
		return err
	}
	v, err := capacity.Verify(ctx, o, plan, j.verify, text)
	if err != nil {
		if errors.Is(err, tune.ErrNotRoot) {
			return deniedError{err}
		}
		return capacityErr(err)
	}
	r := v.Report
	if j.json != "-" {
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
	if j.json != "" {
		if err := writeOut(j.json, stdout, "report", indentedJSON(r)); err != nil {
			return err
		}
	}
	if j.html != "" {
		// One page per search: the after page beside the named one.
		for _, c := range []struct {
			path string
			c    *report.Capacity
		}{{j.html, r.Before}, {afterPath(j.html), r.After}} {
			if err := writeOut(c.path, stdout, "HTML report", func(w io.Writer) error { return report.CapacityHTML(w, c.c) }); err != nil {
				return err
			}
		}
	}
	return belowCapacity(r.After, j.failBelow, stderr)
}
