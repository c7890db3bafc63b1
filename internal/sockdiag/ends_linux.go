package sockdiag

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"
)

// The sock_diag multicast groups on which the kernel sends a TCP
// socket's last state as it is destroyed (include/uapi/linux/sock_diag.h:
// SKNLGRP_INET_TCP_DESTROY, SKNLGRP_INET6_TCP_DESTROY; Linux 4.9+).
const (
	grpInetTCPDestroy  = 1
	grpInet6TCPDestroy = 3
)

// endsBuf is the receive buffer asked for the notices: a message is
// about 400 bytes, its skb 1.3 KiB, so 4 MiB holds some 3000 ends
// between two reads, which the watcher does as they come.
const endsBuf = 4 << 20

// Ends reads the kernel's notices of TCP connections' ends in one
// namespace: each socket's inet_diag_msg and last tcp_info, sent as the
// kernel destroys it (sock_diag_broadcast_destroy, to listeners of its
// own namespace, root only).
type Ends struct {
	f    *os.File
	wg   sync.WaitGroup
	once sync.Once
}

// WatchEnds joins the destroy groups of the calling thread's namespace
// and hands every notice to s.End until Close. Where the kernel or the
// caller's privileges do not allow it, it returns why, and s says so in
// its snapshots.
func WatchEnds(s *Senders) (*Ends, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		s.endsState(false, err.Error(), 0)
		return nil, fmt.Errorf("open sock_diag socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, endsBuf); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, endsBuf)
	}
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		s.endsState(false, err.Error(), 0)
		return nil, fmt.Errorf("bind sock_diag socket: %w", err)
	}
	for _, g := range []int{grpInetTCPDestroy, grpInet6TCPDestroy} {
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, g); err != nil {
			if g == grpInet6TCPDestroy && (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT)) {
				continue // a kernel without IPv6
			}
			unix.Close(fd)
			why := fmt.Sprintf("the kernel's notices of connections' ends (sock_diag destroy group %d): %v", g, err)
			s.endsState(false, why, 0)
			return nil, errors.New(why)
		}
	}
	// Through the runtime's poller: Close wakes the reader.
	e := &Ends{f: os.NewFile(uintptr(fd), "sock_diag ends")}
	rc, err := e.f.SyscallConn()
	if err != nil {
		e.f.Close()
		s.endsState(false, err.Error(), 0)
		return nil, err
	}
	s.endsState(true, "", 0)
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		buf := make([]byte, recvBufLen)
		var m InetDiagMsg
		var t TCPInfo
		for {
			var n int
			var rerr error
			err := rc.Read(func(fd uintptr) bool {
				n, _, rerr = unix.Recvfrom(int(fd), buf, 0)
				return !errors.Is(rerr, unix.EAGAIN)
			})
			if err != nil {
				return // closed
			}
			if errors.Is(rerr, unix.ENOBUFS) {
				// The kernel dropped notices: how many is not said.
				s.endsState(true, "", 1)
				continue
			}
			if rerr != nil {
				if errors.Is(rerr, unix.EINTR) {
					continue
				}
				s.endsState(false, "reading the notices of connections' ends: "+rerr.Error(), 0)
				return
			}
			_, _, _ = Messages(buf[:n], func(p []byte) error {
				if ok, _ := DecodeInetDiagInfo(p, &m, &t); ok {
					s.End(&m, &t)
				}
				return nil
			})
		}
	}()
	return e, nil
}

// Close stops the watcher and waits for it.
func (e *Ends) Close() {
	if e == nil {
		return
	}
	e.once.Do(func() {
		e.f.Close()
		e.wg.Wait()
	})
}
