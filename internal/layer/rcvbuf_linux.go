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
