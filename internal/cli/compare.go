package cli

import (
	"context"
	"errors"
	"io"

	"github.com/netdoctor/netdoctor/internal/report"
)

// readCompared reads a run or load report for compare.
func readCompared(path string) (*report.Run, error) {
	r, err := readWith(path, "report", report.Read)
	var k *report.KindError
	switch {
	case errors.As(err, &k):
		return nil, badInput("read report %s: not a netdoctor run or load report (version 1)", path)
	case err != nil:
		return nil, err
	case r.Load == nil:
		return nil, badInput("read report %s: it has no load results (compare takes run or load reports)", path)
	}
	return r, nil
}

func runCompare(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", stderr)
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
	return report.CompareText(stdout, pos[0], a, pos[1], b)
}
