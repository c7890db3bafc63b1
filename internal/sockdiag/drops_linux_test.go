package sockdiag

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// overflow makes clients connection attempts to 127.0.0.1:port without
// waiting for them, then waits until the namespace's TcpExt.ListenDrops
// has risen by at least want since before, and closes the clients, so
// that no retransmitted SYN adds drops afterwards. It must run inside
// the namespace.
func overflow(t *testing.T, port, clients int, before uint64, want uint64) error {
	t.Helper()
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	for range clients {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return err
		}
		fds = append(fds, fd)
		err = unix.Connect(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port})
		if err != nil && !errors.Is(err, unix.EINPROGRESS) {
			return err
		}
	}
	poll.Until(t, time.Minute, func() error {
		c, err := procnet.Default().Counters()
		if err != nil {
			t.Fatal(err)
		}
		if rose := c["TcpExt.ListenDrops"] - before; rose < want {
			return fmt.Errorf("TcpExt.ListenDrops rose by %d, want at least %d", rose, want)
		}
		return nil
	})
	return nil
}

// TestListenerDrops overflows a listener with backlog 1 that never
// accepts, in a namespace of its own, and checks that its sk_drops as
// sock_diag reports it is the namespace's TcpExt.ListenDrops delta: the
// only listener there takes every drop.
func TestListenerDrops(t *testing.T) {
	n := newNetns(t, "drops")
	var drops, delta, overflows uint64
	var addr string
	err := n.Do(func() error {
		before, err := procnet.Default().Counters()
		if err != nil {
			return err
		}
		_, port := listenBacklog(t, 1)
		// The accept queue holds backlog+1 connections; every further
		// SYN is dropped, each counted once per transmission.
		const clients = 6
		if err := overflow(t, port, clients, before["TcpExt.ListenDrops"], clients-2); err != nil {
			return err
		}
		addr = "127.0.0.1:" + strconv.Itoa(port)
		s, err := Collect(Options{})
		if err != nil {
			return err
		}
		after, err := procnet.Default().Counters()
		if err != nil {
			return err
		}
		l := findListener(s, addr)
		if l == nil {
			t.Fatalf("listener %s not reported: %+v", addr, s.Listeners)
		}
		drops = l.Drops
		delta = after["TcpExt.ListenDrops"] - before["TcpExt.ListenDrops"]
		overflows = after["TcpExt.ListenOverflows"] - before["TcpExt.ListenOverflows"]
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("listener %s: drops %d, TcpExt.ListenDrops +%d, TcpExt.ListenOverflows +%d", addr, drops, delta, overflows)
	if drops == 0 || drops != delta {
		t.Errorf("listener drops = %d, want the TcpExt.ListenDrops delta %d (> 0)", drops, delta)
	}
}
