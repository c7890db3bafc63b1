//go:build !linux

package app

import (
	"net/netip"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

func outbound(int, int, map[uint16]bool) (sockdiag.SockID, *unixEnds, bool) {
	return sockdiag.SockID{}, nil, false
}

func localAddrs() map[netip.Addr]bool { return nil }
