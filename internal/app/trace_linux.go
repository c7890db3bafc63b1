package app

import (
	"net"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// outbound returns the addresses of socket fd of process pid when it is
// a TCP connection whose local port is not one of listenPorts: one the
// process opened, not one it accepted. For a unix stream socket it
// returns instead its own name and its peer's (ux), for unixOutbound to
// judge, and ok is false.
func outbound(pid, fd int, listenPorts map[uint16]bool) (id sockdiag.SockID, ux *unixEnds, ok bool) {
	c, err := copyFD(pid, fd)
	if err != nil {
		return id, nil, false
	}
	defer unix.Close(c)
	if typ, err := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return id, nil, false
	}
	la, err1 := unix.Getsockname(c)
	ra, err2 := unix.Getpeername(c)
	if err1 != nil || err2 != nil {
		return id, nil, false
	}
	cookie, _ := unix.GetsockoptUint64(c, unix.SOL_SOCKET, unix.SO_COOKIE)
	if own, ok := la.(*unix.SockaddrUnix); ok {
		// x/sys names an abstract socket "@name", as sock_diag's
		// unixName and ss do; an unnamed one "".
		if peer, ok := ra.(*unix.SockaddrUnix); ok {
			return id, &unixEnds{own: own.Name, peer: peer.Name, cookie: cookie}, false
		}
		return id, nil, false
	}
	id = sockdiag.SockID{Local: addrPort(la), Remote: addrPort(ra), Cookie: cookie}
	if !id.Local.IsValid() || !id.Remote.IsValid() || listenPorts[id.Local.Port()] {
		return sockdiag.SockID{}, nil, false
	}
	return id, nil, true
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
