package layer

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// roomy gives the socket that counts a UDP test's datagrams a receive
// buffer of udpReadBuffer bytes, beyond net.core.rmem_max where allowed
// (CAP_NET_ADMIN, as the agent has). A reader that falls behind for a
// moment on a busy host then finds its datagrams still queued; with the
// default buffer (~270 small datagrams) the kernel drops them, and the
// test counts its own host's drops as the path's loss. Best effort: a
// socket that refuses keeps its buffer.
func roomy(c any) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	rc.Control(func(fd uintptr) {
		if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, udpReadBuffer) != nil {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, udpReadBuffer)
		}
	})
}

// unread is what a stream's socket has received and not yet been read
// (SIOCINQ), 0 when it cannot tell.
func unread(c any) uint64 {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0
	}
	var n int
	rc.Control(func(fd uintptr) {
		n, err = unix.IoctlGetInt(int(fd), unix.SIOCINQ)
	})
	if err != nil || n < 0 {
		return 0
	}
	return uint64(n)
}
