//go:build !linux

package kmsg

import (
	"fmt"
	"runtime"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// SyslogReader reads the kernel log through syslog(2), on Linux only.
type SyslogReader struct{ Lost uint64 }

// OpenSyslog returns an error wrapping ErrNotSupported.
func OpenSyslog() (*SyslogReader, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// Read returns an error wrapping ErrNotSupported.
func (r *SyslogReader) Read() ([]evidence.KernelMsg, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// Close does nothing.
func (r *SyslogReader) Close() error { return nil }
