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
