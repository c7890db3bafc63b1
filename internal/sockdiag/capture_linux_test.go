package sockdiag

import (
	"net"
	"os"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
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
	if err := c.request(sockDiagByFamily, inetRequest(afInet, ^uint32(0))); err != nil {
		t.Fatal(err)
	}
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
			break
		}
	}
	if err := os.WriteFile("testdata/tcp4_dump.bin", out, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("listener port %d, %d bytes", port, len(out))
}

// readRaw reads one datagram.
func readRaw(c *conn, buf []byte) (int, error) {
	n, _, err := unix.Recvfrom(c.fd, buf, 0)
	return n, err
}
