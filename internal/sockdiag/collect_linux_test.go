package sockdiag

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// listenBacklog opens a TCP listener with an exact listen() backlog, which
// net.Listen does not allow.
func listenBacklog(t testing.TB, backlog int) (fd int, port int) {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, backlog); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, sa.(*syscall.SockaddrInet4).Port
}

func findListener(s *kernel.Sockets, addr string) *kernel.Listener {
	for i := range s.Listeners {
		if s.Listeners[i].Addr == addr {
			return &s.Listeners[i]
		}
	}
	return nil
}

// TestCollectSeesQueuedConnections opens a listener that never accepts and
// checks that its backlog, queue length and the connections to it are
// reported exactly. It needs no privilege: sock_diag shows every socket of
// the caller's own namespace.
func TestCollectSeesQueuedConnections(t *testing.T) {
	fd, port := listenBacklog(t, 7)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	const conns = 5
	for range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
	}
	s, err := Collect(Options{PortLow: 1, PortHigh: 65535, Unix: true})
	if err != nil {
		t.Fatal(err)
	}
	l := findListener(s, addr)
	if l == nil {
		t.Fatalf("listener %s not reported; listeners: %+v", addr, s.Listeners)
	}
	if l.SendQ != 7 || l.RecvQ != conns || l.Proto != "tcp" || l.Port != port {
		t.Errorf("listener = %+v, want SendQ 7, RecvQ %d", *l, conns)
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if l.Inode != st.Ino {
		t.Errorf("listener inode = %d, want %d", l.Inode, st.Ino)
	}
	var remote *kernel.Remote
	for i := range s.Remotes {
		if s.Remotes[i].Addr == addr {
			remote = &s.Remotes[i]
		}
	}
	if remote == nil || remote.Established != conns || remote.Ephemeral != conns {
		t.Errorf("remote %s = %+v, want %d established, all ephemeral", addr, remote, conns)
	}
	// Both ends of each connection are ESTABLISHED: the client sockets and
	// the server sockets waiting in the accept queue.
	if got := s.TCP["ESTABLISHED"]; got < 2*conns {
		t.Errorf("ESTABLISHED = %d, want at least %d", got, 2*conns)
	}
}

func TestCollectUnixListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := Collect(Options{Unix: true})
	if err != nil {
		t.Fatal(err)
	}
	u := findListener(s, path)
	if u == nil || u.Proto != "unix" || u.RecvQ != 1 {
		t.Fatalf("unix listener %s = %+v, want proto unix with 1 queued", path, u)
	}
	if u.SendQ == 0 {
		t.Errorf("unix listener backlog is 0, want somaxconn-capped backlog")
	}
	_ = os.Remove(path)
}

// TestCompatDumpBothFamilies checks that the legacy request this package
// relies on for a single walk still returns IPv6 sockets with IPv4 ones.
func TestCompatDumpBothFamilies(t *testing.T) {
	l6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer l6.Close()
	_, port4 := listenBacklog(t, 3)
	c, err := open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	if err := c.request(tcpDiagGetSock, compatRequest(listenBits, listenExt)); err != nil {
		t.Fatal(err)
	}
	var s Summary
	var m InetDiagMsg
	if err := c.receive(func(p []byte) error {
		if err := DecodeInetDiagMsg(p, &m); err != nil {
			return err
		}
		s.AddInet(&m)
		return nil
	}); err != nil {
		t.Fatalf("compat dump: %v", err)
	}
	got := s.Sockets()
	if findListener(got, l6.Addr().String()) == nil || findListener(got, "127.0.0.1:"+strconv.Itoa(port4)) == nil {
		t.Errorf("compat dump lacks the v4 or v6 listener: %+v", got.Listeners)
	}
}

// TestCollectInboundQueues: per listening port, the connections on it,
// those holding a request nobody has read (in the accept queue or
// accepted), and those the client closed and the server has not: what a
// worker pool that has run out of workers, or a server stuck, leaves in
// the kernel.
func TestCollectInboundQueues(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	addr := ln.Addr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var accepted []net.Conn
	accept := func() {
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		accepted = append(accepted, s)
	}
	// Two requests waiting, accepted and not read; one in the accept
	// queue with its request; one idle connection, accepted; one the
	// client closed and the server has not.
	for range 2 {
		dial().Write([]byte("GET / HTTP/1.1\r\n\r\n"))
		accept()
	}
	dial()
	accept()
	closed := dial()
	accept()
	closed.Close()
	dial().Write([]byte("GET / HTTP/1.1\r\n\r\n")) // stays in the accept queue
	poll.Until(t, time.Minute, func() error {
		s, err := Collect(Options{PortLow: 1, PortHigh: 65535})
		if err != nil {
			t.Fatal(err)
		}
		l := findListener(s, addr)
		if l == nil {
			t.Fatalf("listener %s not reported", addr)
		}
		if got, want := [3]int{l.Established, l.Unread, l.CloseWait}, [3]int{4, 3, 1}; got != want {
			return fmt.Errorf("listener established, unread, close-wait = %v, want %v", got, want)
		}
		return nil
	})
}
