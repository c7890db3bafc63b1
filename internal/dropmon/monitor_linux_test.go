package dropmon

import (
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
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
	var d *evidence.Drops
	var got, port uint64
	poll.Until(t, 10*time.Second, func() error {
		d = namespace(m, ino)
		if d.Unavailable != "" {
			t.Fatal(d.Unavailable)
		}
		got, port = 0, 0
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
		if port < n {
			return fmt.Errorf("%d of %d NO_SOCKET drops to udp port %d counted (%d udp NO_SOCKET in all): %+v", port, n, to.Port, got, d.Counts)
		}
		return nil
	})
	if d.Seen < got {
		t.Errorf("the monitor saw %d drops, counted %d", d.Seen, got)
	}
}

// TestSharedClosesWithTheLast: one monitor for every caller; the last
// release detaches it: its programs are gone from the kernel, and a
// release called twice changes nothing.
func TestSharedClosesWithTheLast(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop monitor needs root")
	}
	a, releaseA, err := Shared()
	var u *Unavailable
	if errors.As(err, &u) {
		t.Skipf("drop monitor unavailable here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	b, releaseB, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	if a != b {
		t.Fatal("two monitors in one process")
	}
	var ids []ebpf.ProgramID
	for _, p := range a.coll.Programs {
		info, err := p.Info()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := info.ID()
		ids = append(ids, id)
	}
	releaseA()
	releaseA()
	if a.coll == nil {
		t.Fatal("closed while another caller holds it")
	}
	releaseB()
	if a.coll != nil || len(a.links) != 0 {
		t.Fatal("the last release did not close it")
	}
	// The kernel frees a program after an RCU grace period: poll.
	for _, id := range ids {
		poll.True(t, 10*time.Second, fmt.Sprintf("program %d unloaded after the last release", id), func() bool {
			p, err := ebpf.NewProgramFromID(id)
			if err != nil {
				return true
			}
			p.Close()
			return false
		})
	}
}

// namespace is what m counted for the namespace of inode ino, read and
// named at once, as a snapshot's collector does in its two stages.
func namespace(m *Monitor, ino uint64) *evidence.Drops {
	c, err := m.Read()
	if err != nil {
		return &evidence.Drops{Since: m.Since(), Unavailable: err.Error()}
	}
	return m.Drops(c, ino)
}
