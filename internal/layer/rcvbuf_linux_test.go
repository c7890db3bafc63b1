package layer

import (
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRoomy: a counting socket gets its 8 MiB receive buffer (root may
// pass net.core.rmem_max; the kernel reports twice what was asked, its
// bookkeeping included).
func TestRoomy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("beyond net.core.rmem_max needs CAP_NET_ADMIN")
	}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	roomy(pc)
	rc, err := pc.(*net.UDPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var got int
	rc.Control(func(fd uintptr) { got, err = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
	if err != nil || got < udpReadBuffer {
		t.Errorf("SO_RCVBUF %d (%v), want at least %d", got, err, udpReadBuffer)
	}
}
