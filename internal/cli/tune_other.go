//go:build !linux

package cli

import (
	"context"
	"errors"
	"io"

	"github.com/netdoctor/netdoctor/internal/run"
)

func runTuneCmd(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("tune needs Linux: it writes /proc/sys and reloads Linux services")
}

func runVerify(context.Context, run.Options, *loadOpts, map[string]bool, string, bool, failOn, io.Writer, io.Writer) error {
	return errors.New("run --verify-with needs Linux")
}
