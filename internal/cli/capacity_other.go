//go:build !linux

package cli

import (
	"context"
	"errors"
	"io"

	"github.com/netdoctor/netdoctor/internal/capacity"
)

func capacityVerify(context.Context, capacity.Options, capacityJob, io.Writer, io.Writer, io.Writer) error {
	return errors.New("capacity --verify-with needs Linux: a plan writes /proc/sys and reloads Linux services")
}
