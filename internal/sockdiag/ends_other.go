//go:build !linux

package sockdiag

import (
	"fmt"
	"runtime"
)

// Ends is only implemented on Linux.
type Ends struct{}

// WatchEnds is only implemented on Linux.
func WatchEnds(s *Senders) (*Ends, error) {
	err := fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
	s.endsState(false, err.Error(), 0)
	return nil, err
}

// Close does nothing.
func (e *Ends) Close() {}
