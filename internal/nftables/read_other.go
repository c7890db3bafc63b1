//go:build !linux

package nftables

import (
	"errors"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// ErrUnavailable marks a namespace whose rules cannot be read.
var ErrUnavailable = errors.New("nftables unavailable")

// Read needs Linux.
func Read() (*evidence.Firewall, error) { return nil, ErrUnavailable }
