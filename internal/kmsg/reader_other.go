//go:build !linux

package kmsg

import (
	"fmt"
	"runtime"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Reader reads the kernel log. Only Linux has /dev/kmsg; elsewhere Open
// always fails.
type Reader struct {
	// Lost counts the records the kernel overwrote before Read got to
	// them.
	Lost uint64
}

// Open returns an error wrapping ErrNotSupported.
func Open() (*Reader, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// Read returns an error wrapping ErrNotSupported.
func (r *Reader) Read() ([]evidence.KernelMsg, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// Close does nothing.
func (r *Reader) Close() error { return nil }
