//go:build !linux

package sockdiag

import (
	"fmt"
	"runtime"
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
