package dropmon

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// start starts the monitor or skips the test when this host cannot run
// it, saying why.
func start(t *testing.T) *Monitor {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the drop monitor needs root")
	}
	m, err := Start()
	var u *Unavailable
	if errors.As(err, &u) {
		t.Skipf("drop monitor unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestMonitorCountsNoSocket sends UDP datagrams to a port nothing
// listens on: the kernel drops each with NO_SOCKET on lo, and the
// monitor counts them under this namespace with that port.
func TestMonitorCountsNoSocket(t *testing.T) {
	m := start(t)
	ino, err := netns.Inode("")
	if err != nil {
		t.Fatal(err)
	}
	// A port bound then closed is free for the test's few milliseconds.
	l, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	to := l.LocalAddr().(*net.UDPAddr)
	l.Close()
	// Unconnected: an ICMP port unreachable does not fail the next send.
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const n = 20
	for range n {
		if _, err := c.WriteTo([]byte("x"), to); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := m.Namespace(ino)
		if d.Unavailable != "" {
			t.Fatal(d.Unavailable)
		}
		var got, port uint64
		for _, x := range d.Counts {
			if x.Reason != "NO_SOCKET" || x.Proto != "udp" {
				continue
			}
			got += x.Packets
			if x.Iface != "lo" {
				t.Errorf("NO_SOCKET on %q, want lo", x.Iface)
			}
			if x.Location == "" {
				t.Errorf("NO_SOCKET's location not named")
			}
			for _, p := range x.Ports {
				if p.Port == to.Port && !p.Socket {
					port += p.Packets
				}
			}
		}
		if port >= n {
			if d.Seen < got {
				t.Errorf("the monitor saw %d drops, counted %d", d.Seen, got)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d NO_SOCKET drops to udp port %d counted (%d udp NO_SOCKET in all): %+v", port, n, to.Port, got, d.Counts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
