//go:build !linux

package sockdiag

import (
	"fmt"
	"runtime"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Collect is only implemented on Linux.
func Collect(Options) (*kernel.Sockets, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// CollectSenders is only implemented on Linux.
func CollectSenders(Options) (*kernel.Sockets, *kernel.Senders, error) {
	return nil, nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}
