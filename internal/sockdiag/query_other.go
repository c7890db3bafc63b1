//go:build !linux

package sockdiag

import (
	"fmt"
	"net/netip"
	"runtime"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Querier is only implemented on Linux.
type Querier struct{}

// NewQuerier is only implemented on Linux.
func NewQuerier() (*Querier, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// Close does nothing.
func (q *Querier) Close() {}

// Query is only implemented on Linux.
func (q *Querier) Query([]SockID, func(int, *InetDiagMsg, *TCPInfo)) error {
	return fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// Listener is only implemented on Linux.
func (q *Querier) Listener(netip.AddrPort) (kernel.Listener, bool, error) {
	return kernel.Listener{}, false, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}

// QueryUnix is only implemented on Linux.
func (q *Querier) QueryUnix([]UnixID, func(int, *UnixDiagMsg)) error {
	return fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}
