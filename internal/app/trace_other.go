//go:build !linux

package app

import (
	"net/netip"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

func outbound(int, int, map[uint16]bool) (sockdiag.SockID, *unixEnds, sockOpt, bool) {
	return sockdiag.SockID{}, nil, optUnknown, false
}

func peerNoDelay(string, []int, map[uint32]sockOpt) {}

func localAddrs() map[netip.Addr]bool { return nil }
