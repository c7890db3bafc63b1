package layer

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// tcpInfo reads TCP_INFO of c's socket (getsockopt(2)); ok is false for
// anything but a TCP connection.
func tcpInfo(c net.Conn) (StreamInfo, bool) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return StreamInfo{}, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return StreamInfo{}, false
	}
	var ti *unix.TCPInfo
	var serr error
	if err := raw.Control(func(fd uintptr) { ti, serr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil || serr != nil {
		return StreamInfo{}, false
	}
	return StreamInfo{Retrans: ti.Total_retrans, RTT: time.Duration(ti.Rtt) * time.Microsecond,
		MinRTT: time.Duration(ti.Min_rtt) * time.Microsecond, BytesAcked: ti.Bytes_acked}, true
}
