package sockdiag

import (
	"net"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// TestCaptureFixture rewrites testdata/tcp4_dump.bin, the raw datagrams of
// a real dump with a listener (backlog 7, 5 queued). Run it by hand:
// NETDOCTOR_CAPTURE=1 go test -run CaptureFixture ./internal/sockdiag.
func TestCaptureFixture(t *testing.T) {
	if os.Getenv("NETDOCTOR_CAPTURE") == "" {
		t.Skip("set NETDOCTOR_CAPTURE=1 to rewrite the fixture")
	}
	_, port := listenBacklog(t, 7)
	for range 5 {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.request(sockDiagByFamily, inetRequest(afInet, ^uint32(0), 0)); err != nil {
		t.Fatal(err)
	}
	out := readDump(t, c)
	if err := os.WriteFile("testdata/tcp4_dump.bin", out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("listener port %d, %d bytes", port, len(out))
}

// TestCaptureListenFixture rewrites testdata/tcp_listen_meminfo.bin, the
// LISTEN-only dump Collect makes (legacy request, INET_DIAG_SKMEMINFO),
// taken in a namespace of its own: 127.0.0.1:7001 with backlog 1
// overflowed, 127.0.0.1:7002 and [::1]:7003 without drops. Run it by
// hand, as root: NETDOCTOR_CAPTURE=1 go test -run CaptureListenFixture
// ./internal/sockdiag.
func TestCaptureListenFixture(t *testing.T) {
	if os.Getenv("NETDOCTOR_CAPTURE") == "" {
		t.Skip("set NETDOCTOR_CAPTURE=1 to rewrite the fixture")
	}
	n := newNetns(t, "capture")
	var out []byte
	if err := n.Do(func() error {
		before, err := procnet.Default().Counters()
		if err != nil {
			return err
		}
		listenAt(t, unix.AF_INET, 7001, 1)
		listenAt(t, unix.AF_INET, 7002, 5)
		listenAt(t, unix.AF_INET6, 7003, 5)
		if err := overflow(t, 7001, 6, before["TcpExt.ListenDrops"], 4); err != nil {
			return err
		}
		after, err := procnet.Default().Counters()
		if err != nil {
			return err
		}
		c, err := open()
		if err != nil {
			return err
		}
		defer c.close()
		if err := c.request(tcpDiagGetSock, compatRequest(listenBits, listenExt)); err != nil {
			return err
		}
		out = readDump(t, c)
		t.Logf("TcpExt.ListenDrops +%d", after["TcpExt.ListenDrops"]-before["TcpExt.ListenDrops"])
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/tcp_listen_meminfo.bin", out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes", len(out))
}

// listenAt opens a listener on the loopback address of family at port.
func listenAt(t *testing.T, family, port, backlog int) {
	t.Helper()
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	var sa unix.Sockaddr = &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}
	if family == unix.AF_INET6 {
		sa = &unix.SockaddrInet6{Addr: [16]byte{15: 1}, Port: port}
	}
	if err := unix.Bind(fd, sa); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		t.Fatal(err)
	}
}

// readDump reads the datagrams of one dump, up to its NLMSG_DONE.
func readDump(t *testing.T, c *conn) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, recvBufLen)
	for {
		n, err := readRaw(c, buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, buf[:n]...)
		done, _, err := Messages(buf[:n], func([]byte) error { return nil })
		if err != nil || done {
			return out
		}
	}
}

// readRaw reads one datagram.
func readRaw(c *conn, buf []byte) (int, error) {
	n, _, err := unix.Recvfrom(c.fd, buf, 0)
	return n, err
}
