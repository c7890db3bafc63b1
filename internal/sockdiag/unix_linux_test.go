package sockdiag

import (
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// unixPair connects a client to a listener on a socket file and accepts
// it; the client writes 5 bytes the server does not read. It returns the
// listener's path and the inodes of the listener, the client's socket and
// the accepted one.
func unixPair(t *testing.T) (path string, ln, client, accepted uint32) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "dep.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close(); l.Close() })
	if _, err := c.Write([]byte("query")); err != nil {
		t.Fatal(err)
	}
	return path, inodeOf(t, l.(*net.UnixListener)), inodeOf(t, c.(*net.UnixConn)), inodeOf(t, s.(*net.UnixConn))
}

func inodeOf(t *testing.T, c syscall.Conn) uint32 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st unix.Stat_t
	rc.Control(func(fd uintptr) { err = unix.Fstat(int(fd), &st) })
	if err != nil {
		t.Fatal(err)
	}
	return uint32(st.Ino)
}

// TestQueryUnix: exact lookups of a unix client socket, its accepted
// peer, its listener and a socket that does not exist. The client's
// socket is unnamed, its peer is the accepted socket, and what it wrote
// is unread there; the accepted socket carries the listener's path. With
// NETDOCTOR_CAPTURE=1 it rewrites testdata/unix_exact.bin, the answers'
// raw datagrams, which TestDecodeUnixFixture reads.
func TestQueryUnix(t *testing.T) {
	path, ln, client, accepted := unixPair(t)
	q, err := NewQuerier()
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	ids := []UnixID{{Inode: client}, {Inode: accepted}, {Inode: ln}, {Inode: 1}}
	got := map[int]UnixDiagMsg{}
	if err := q.QueryUnix(ids, func(i int, m *UnixDiagMsg) { got[i] = *m }); err != nil {
		t.Fatal(err)
	}
	checkUnixExact(t, got, path, ln, client, accepted)
	// The cookie pins the socket: a wrong one finds nothing.
	n := 0
	if err := q.QueryUnix([]UnixID{{Inode: client, Cookie: got[0].Cookie + 1}, {Inode: client, Cookie: got[0].Cookie}}, func(int, *UnixDiagMsg) { n++ }); err != nil || n != 1 {
		t.Errorf("by cookie: %d found (%v), want 1", n, err)
	}
	if os.Getenv("NETDOCTOR_CAPTURE") == "" {
		return
	}
	raw := captureUnix(t, q, ids)
	if err := os.WriteFile("testdata/unix_exact.bin", raw, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes", len(raw))
}

// captureUnix sends the lookups as QueryUnix does and returns the raw
// datagrams of the answers.
func captureUnix(t *testing.T, q *Querier, ids []UnixID) []byte {
	t.Helper()
	msgLen := nlmsgHdrLen + unixDiagReqLen
	msg := make([]byte, msgLen*len(ids))
	for i, id := range ids {
		b := msg[i*msgLen:]
		binary.NativeEndian.PutUint32(b, uint32(msgLen))
		binary.NativeEndian.PutUint16(b[4:], sockDiagByFamily)
		binary.NativeEndian.PutUint16(b[6:], nlmFRequest)
		binary.NativeEndian.PutUint32(b[8:], uint32(i+1))
		copy(b[nlmsgHdrLen:], unixExactRequest(id))
	}
	if err := unix.Sendto(q.c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		t.Fatal(err)
	}
	var out []byte
	for left := len(ids); left > 0; {
		n, err := readRaw(q.c, q.buf)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, q.buf[:n]...)
		left -= eachReply(q.buf[:n], func(uint32, []byte) {})
	}
	return out
}
