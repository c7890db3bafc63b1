package app

import (
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// outbound returns the addresses of socket fd of process pid when it is
// a TCP connection whose local port is not one of listenPorts: one the
// process opened, not one it accepted.
func outbound(pid, fd int, listenPorts map[uint16]bool) (sockdiag.SockID, bool) {
	c, err := copyFD(pid, fd)
	if err != nil {
		return sockdiag.SockID{}, false
	}
	defer unix.Close(c)
	if typ, err := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return sockdiag.SockID{}, false
	}
	la, err1 := unix.Getsockname(c)
	ra, err2 := unix.Getpeername(c)
	if err1 != nil || err2 != nil {
		return sockdiag.SockID{}, false
	}
	id := sockdiag.SockID{Local: addrPort(la), Remote: addrPort(ra)}
	if !id.Local.IsValid() || !id.Remote.IsValid() || listenPorts[id.Local.Port()] {
		return sockdiag.SockID{}, false
	}
	if ck, err := unix.GetsockoptUint64(c, unix.SOL_SOCKET, unix.SO_COOKIE); err == nil {
		id.Cookie = ck
	}
	return id, true
}

func addrPort(sa unix.Sockaddr) netip.AddrPort {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(a.Addr), uint16(a.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(a.Addr).Unmap(), uint16(a.Port))
	}
	return netip.AddrPort{}
}

// localAddrs are the calling thread's namespace's addresses.
func localAddrs() map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			if ip, ok := netip.AddrFromSlice(n.IP); ok {
				out[ip.Unmap()] = true
			}
		}
	}
	return out
}
