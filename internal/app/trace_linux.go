package app

import (
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// outbound returns the addresses of socket fd of process pid when it is
// a TCP connection whose local port is not one of listenPorts: one the
// process opened, not one it accepted. For a unix stream socket it
// returns instead its own name and its peer's (ux), for unixOutbound to
// judge, and ok is false.
//
// noDelay is TCP_NODELAY on a TCP connection.
func outbound(pid, fd int, listenPorts map[uint16]bool) (id sockdiag.SockID, ux *unixEnds, noDelay sockOpt, ok bool) {
	c, err := copyFD(pid, fd)
	if err != nil {
		return id, nil, noDelay, false
	}
	defer unix.Close(c)
	if typ, err := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_TYPE); err != nil || typ != unix.SOCK_STREAM {
		return id, nil, noDelay, false
	}
	la, err1 := unix.Getsockname(c)
	ra, err2 := unix.Getpeername(c)
	if err1 != nil || err2 != nil {
		return id, nil, noDelay, false
	}
	cookie, _ := unix.GetsockoptUint64(c, unix.SOL_SOCKET, unix.SO_COOKIE)
	if own, ok := la.(*unix.SockaddrUnix); ok {
		// x/sys names an abstract socket "@name", as sock_diag's
		// unixName and ss do; an unnamed one "".
		if peer, ok := ra.(*unix.SockaddrUnix); ok {
			return id, &unixEnds{own: own.Name, peer: peer.Name, cookie: cookie}, noDelay, false
		}
		return id, nil, noDelay, false
	}
	id = sockdiag.SockID{Local: addrPort(la), Remote: addrPort(ra), Cookie: cookie}
	if !id.Local.IsValid() || !id.Remote.IsValid() || listenPorts[id.Local.Port()] {
		return sockdiag.SockID{}, nil, noDelay, false
	}
	return id, nil, tcpNoDelay(c), true
}

// tcpNoDelay reads TCP_NODELAY on socket fd.
// It is what the process set (Go and Node's http set it on every
// connection; most C libraries leave Nagle on); the kernel also turns it
// on for a moment with TCP_CORK cleared, which reads the same.
func tcpNoDelay(fd int) sockOpt {
	v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
	switch {
	case err != nil:
		return optUnknown
	case v != 0:
		return optOn
	}
	return optOff
}

// peerNoDelay reads TCP_NODELAY on the sockets with the inodes of want
// among the descriptors of processes pids (a dependency's listener's
// owners), each on a copy of it, and sets it in want; those not found
// stay optUnknown. Only socket links are read, by their name
// (socket:[ino]); each process's descriptors are walked once, up to
// maxFDScan of them.
func peerNoDelay(proc string, pids []int, want map[uint32]sockOpt) {
	left := len(want)
	for _, pid := range pids {
		dir := proc + "/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for i, e := range ents {
			if i >= maxFDScan || left == 0 {
				break
			}
			l, err := os.Readlink(dir + "/" + e.Name())
			if err != nil || !strings.HasPrefix(l, "socket:[") {
				continue
			}
			ino, err := strconv.ParseUint(strings.TrimSuffix(l[len("socket:["):], "]"), 10, 32)
			if v, ok := want[uint32(ino)]; err != nil || !ok || v != optUnknown {
				continue
			}
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			c, err := copyFD(pid, fd)
			if err != nil {
				continue
			}
			want[uint32(ino)] = tcpNoDelay(c)
			unix.Close(c)
			left--
		}
	}
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
