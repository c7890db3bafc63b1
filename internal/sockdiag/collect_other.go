//go:build !linux

package sockdiag

import (
	"fmt"
	"runtime"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Options selects what Collect dumps.
type Options struct {
	PortLow, PortHigh    uint16
	Unix                 bool
	CurrEstab            uint64
	HaveCurrEstab        bool
	MaxEstablishedDetail int
	Listeners            func([]evidence.Listener)
}

// Collect is only implemented on Linux.
func Collect(Options) (*evidence.Sockets, error) {
	return nil, fmt.Errorf("%w on %s", ErrNotSupported, runtime.GOOS)
}
