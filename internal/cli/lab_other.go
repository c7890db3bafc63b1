//go:build !linux

package cli

import (
	"context"
	"errors"
	"io"
)

func runLabCmd(context.Context, []string, io.Writer, io.Writer) error {
	return errors.New("lab needs Linux: it builds network namespaces")
}
