//go:build !linux

package cli

import (
	"context"
	"errors"
	"io"
)

func runTuneCmd(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("tune needs Linux: it writes /proc/sys and reloads Linux services")
}

func runVerify(context.Context, runJob, io.Writer, io.Writer) error {
	return errors.New("run --verify-with needs Linux")
}
