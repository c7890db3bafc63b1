package sockdiag

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestCollectSenders, in a namespace of its own: a server on
// 127.0.0.1:7010 streams to a client that reads nothing into a 4 KiB
// buffer (its window closes, the server probes it, its Send-Q stays
// full), and answers a second client that reads everything and closes.
// The accounting shows the first's time held by the receiver's window,
// its zero window and CUBIC (set on the listener), and the second's end
// as the kernel notified it. With NETDOCTOR_CAPTURE=1 it rewrites
// testdata/tcp_senders_dump.bin (the dump's raw datagrams) and
// testdata/tcp_ends.bin (the notices).
func TestCollectSenders(t *testing.T) {
	n := newNetns(t, "senders")
	s := NewSenders()
	var ends *Ends
	var ln net.Listener
	if err := n.Do(func() error {
		var err error
		if ends, err = WatchEnds(s); err != nil {
			return err
		}
		fd := listenCong(t, 7010, "cubic")
		f := os.NewFile(uintptr(fd), "listener")
		ln, err = net.FileListener(f)
		f.Close()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ends.Close()
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				b := make([]byte, 16)
				if _, err := io.ReadFull(c, b[:1]); err != nil {
					return
				}
				if b[0] == 's' {
					c.Write(make([]byte, 4<<20)) // blocks: the reader never reads
					return
				}
				c.Write(make([]byte, 200<<10))
			}()
		}
	}()
	// The slow reader, its buffer set before it connects.
	var slow int
	if err := n.Do(func() error {
		var err error
		slow, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		if err := unix.SetsockoptInt(slow, unix.SOL_SOCKET, unix.SO_RCVBUF, 4096); err != nil {
			return err
		}
		if err := unix.Connect(slow, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: 7010}); err != nil {
			return err
		}
		_, err = unix.Write(slow, []byte("s"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(slow)
	collect := func() *kernel.Senders {
		var out *kernel.Senders
		if err := n.Do(func() error {
			_, sd, err := CollectSenders(Options{Senders: s, SendersAt: time.Now(), SlowStartAfterIdle: 1})
			out = sd
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	first := collect()
	// The fast client: a whole answer read, then closed.
	if err := n.Do(func() error {
		c, err := net.Dial("tcp", "127.0.0.1:7010")
		if err != nil {
			return err
		}
		defer c.Close()
		c.Write([]byte("f"))
		_, err = io.Copy(io.Discard, c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var last *kernel.Senders
	ok := poll.Wait(20*time.Second, func() bool {
		last = collect()
		if len(last.Listeners) == 0 {
			return false
		}
		g := last.Listeners[0]
		return g.Ended >= 1 && g.ZeroWindowLooks >= 1 && g.RwndLimitedUS >= 100000
	})
	if !ok {
		t.Fatalf("first %+v\nlast %+v", first, last)
	}
	g := last.Listeners[0]
	t.Logf("listener :%d: %+v", g.Port, g)
	if g.Port != 7010 || g.Open != 1 || g.ZeroWindow != 1 || g.Cong["cubic"] != 1 || g.SendQ == 0 || g.BytesSent < 200<<10 || !last.Ends || last.InfoSize != 280 {
		t.Errorf("listener group %+v (ends %v, tcp_info %d bytes)", g, last.Ends, last.InfoSize)
	}
	var c *kernel.SenderConn
	for i := range last.Conns {
		if last.Conns[i].Inbound {
			c = &last.Conns[i]
		}
	}
	if c == nil || c.SndWnd != 0 || c.SendQ == 0 || c.NotSent == 0 || c.Cong != "cubic" || c.SndBuf == 0 || c.WmemQueued == 0 || c.RwndLimitedUS == 0 {
		t.Errorf("the slow reader's server end %+v", c)
	}
	if p := peerGroup(t, last, "127.0.0.1"); !p.Inbound || p.Ended != 1 {
		t.Errorf("peer %+v", p)
	}
	if os.Getenv("NETDOCTOR_CAPTURE") != "" {
		captureSenders(t, n.Do)
	}
}

// listenCong listens on 127.0.0.1:port with the congestion control
// cong, which the connections it accepts inherit.
func listenCong(t *testing.T, port int, cong string) int {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.SetsockoptString(fd, unix.IPPROTO_TCP, unix.TCP_CONGESTION, cong); err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	return fd
}

// captureSenders writes the fixtures: one dump as CollectSenders asks
// for it, and the notices of two connections' ends.
func captureSenders(t *testing.T, do func(func() error) error) {
	var dumpOut, endsOut []byte
	if err := do(func() error {
		c, err := open()
		if err != nil {
			return err
		}
		defer c.close()
		if err := c.request(tcpDiagGetSock, compatRequest(allStates&^listenBits, memExt|infoExt|congExt)); err != nil {
			return err
		}
		dumpOut = readDump(t, c)
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return err
		}
		if err := unix.SetsockoptInt(fd, unix.SOL_NETLINK, unix.NETLINK_ADD_MEMBERSHIP, grpInetTCPDestroy); err != nil {
			return err
		}
		cl, err := net.Dial("tcp", "127.0.0.1:7010")
		if err != nil {
			return err
		}
		cl.Write([]byte("f"))
		io.Copy(io.Discard, cl)
		cl.Close()
		_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 2})
		buf := make([]byte, recvBufLen)
		for got := 0; got < 2; {
			n, _, err := unix.Recvfrom(fd, buf, 0)
			if errors.Is(err, syscall.EAGAIN) {
				return errors.New("fewer than 2 notices of ends")
			}
			if err != nil {
				return err
			}
			endsOut = append(endsOut, buf[:n]...)
			_, _, _ = Messages(buf[:n], func([]byte) error { got++; return nil })
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"testdata/tcp_senders_dump.bin": dumpOut, "testdata/tcp_ends.bin": endsOut} {
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d bytes", name, len(b))
	}
}
