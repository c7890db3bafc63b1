//go:build !linux

package capacity

import (
	"context"
	"errors"
	"io"

	"github.com/netdoctor/netdoctor/internal/tune"
)

// Verify needs Linux: a plan writes /proc/sys and reloads Linux services.
func Verify(context.Context, Options, *tune.Plan, string, io.Writer) (*Verified, error) {
	return nil, errors.New("capacity --verify-with needs Linux: a plan writes /proc/sys and reloads Linux services")
}
