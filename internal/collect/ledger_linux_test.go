package collect

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/lab/flowlab"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// snapshotter observes ns with the drop monitor, closed with the test.
func snapshotter(t *testing.T, ns netns.NS) *Snapshotter {
	t.Helper()
	s, err := New(Config{NetNS: ns, Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// monitored takes a snapshot, or skips the test when the drop monitor
// cannot run here.
func monitored(t *testing.T, s *Snapshotter) evidence.Snapshot {
	t.Helper()
	snap := s.Snapshot(context.Background())
	if snap.Drops == nil || snap.Drops.Unavailable != "" {
		t.Skipf("the drop monitor cannot run here: %+v", snap.Drops)
	}
	return snap
}

// link finds a device's description in a snapshot.
func link(t *testing.T, s evidence.Snapshot, name string) *evidence.Link {
	t.Helper()
	for _, i := range s.Interfaces {
		if i.Name == name {
			if i.Link == nil {
				t.Fatalf("%s is not described: %+v", name, i)
			}
			return i.Link
		}
	}
	t.Fatalf("no interface %s in %+v", name, s.Interfaces)
	return nil
}

func port(l *evidence.Link, name string) *evidence.LinkRef {
	for i := range l.Ports {
		if l.Ports[i].Name == name {
			return &l.Ports[i]
		}
	}
	return nil
}

func showJSON(t *testing.T, what string, v any) {
	if os.Getenv("ND_SHOW") != "" {
		b, _ := json.MarshalIndent(v, "", "  ")
		t.Logf("%s:\n%s", what, b)
	}
}

// TestBridgeMTUEvidence: issue 36's layer-2 MTU mismatch. The server and
// its client are on jumbo frames (9000) and segment everything
// themselves (gso_max_segs 1, as NICs without TSO: a virtual device
// passes a GSO packet of any size); the bridge between them has the
// client's port at 1500, no router, so no ICMP. The connection opens
// (small packets pass), the answer never arrives.
//
// Measured on 6.18: the bridge's namespace drops every frame of the
// answer where it leaves for the client's port, NOT_SPECIFIED in
// br_nf_dev_queue_xmit (br_netfilter, built in, checks the MTU before
// br_dev_queue_push_xmit does), each 9000 bytes; the server
// retransmits full-size segments (MSS 8948) with none acknowledged.
// The evidence: the ledger's row in the bridge's namespace with the
// server's flow and its size, the server's own snapshot listing it first
// among the drops elsewhere (its retransmissions' flow), and the devices
// on both sides with their MTUs: the server's veth (9000) whose peer is
// a port of the bridge, the bridge's ports (9000 and 1500).
func TestBridgeMTUEvidence(t *testing.T) {
	b := flowlab.NewBridge(t, 9000, 1500, 1)
	addr := b.ServerIP + ":8080"
	flowlab.StartStream(t, b.Env, b.ServerNS, addr)
	srv, br := snapshotter(t, b.ServerNS), snapshotter(t, b.BridgeNS)
	monitored(t, srv)
	n, err := flowlab.Fetch(b.ClientNS, addr, 3*time.Second)
	if err != nil {
		t.Fatalf("the connection did not open across the bridge: %v", err)
	}
	if n > 64<<10 {
		t.Fatalf("%d bytes of the answer crossed a 1500 port in 9000-byte frames: no mismatch to see", n)
	}
	var srvSnap, brSnap evidence.Snapshot
	var drop *evidence.FlowDrop
	if !poll.WaitEvery(10*time.Second, 50*time.Millisecond, func() bool {
		srvSnap, brSnap = monitored(t, srv), monitored(t, br)
		for i, d := range brSnap.Drops.Ledger {
			if d.Iface == b.ClientPort && d.Flow.Src == addr && strings.HasPrefix(d.Flow.Dst, b.ClientIP+":") {
				drop = &brSnap.Drops.Ledger[i]
			}
		}
		return drop != nil
	}) {
		showJSON(t, "bridge", brSnap.Drops)
		t.Fatalf("no drop of the server's answer on the bridge's port %s", b.ClientPort)
	}
	showJSON(t, "bridge drops", brSnap.Drops)
	showJSON(t, "server drops", srvSnap.Drops)
	t.Logf("the bridge dropped %d packets of %s → %s: %s in %s, the largest %d bytes", drop.Packets, drop.Flow.Src, drop.Flow.Dst,
		drop.Reason, drop.Location, drop.MaxLen)
	if drop.MaxLen <= 1500 {
		t.Errorf("the frames dropped were of %d bytes at most, not above the port's MTU", drop.MaxLen)
	}

	// The bridge and its ports, with their MTUs.
	bl := link(t, brSnap, b.BridgeDev)
	if bl.Kind != "bridge" || bl.MTU != 1500 {
		t.Errorf("bridge %+v", bl)
	}
	if p := port(bl, b.ServerPort); p == nil || p.MTU != 9000 {
		t.Errorf("the server's port %s at 9000 not among the bridge's ports: %+v", b.ServerPort, bl.Ports)
	}
	if p := port(bl, b.ClientPort); p == nil || p.MTU != 1500 {
		t.Errorf("the client's port %s at 1500 not among the bridge's ports: %+v", b.ClientPort, bl.Ports)
	}
	cp := link(t, brSnap, b.ClientPort)
	cliIno, _ := netns.Inode(b.ClientNS.Path)
	if cp.Kind != "veth" || cp.MTU != 1500 || cp.Master == nil || cp.Master.Name != b.BridgeDev ||
		cp.Peer == nil || cp.Peer.Name != b.ClientDev || cp.Peer.MTU != 9000 || cp.Peer.NetNS != cliIno {
		t.Errorf("the client's port: %+v, peer %+v", cp, cp.Peer)
	}

	// The server's side: its veth, its peer in the bridge, the drop
	// elsewhere first, and the device it was on.
	sl := link(t, srvSnap, b.ServerDev)
	brIno, _ := netns.Inode(b.BridgeNS.Path)
	if sl.Kind != "veth" || sl.MTU != 9000 || sl.GSOMaxSegs != 1 || sl.Peer == nil || sl.Peer.Name != b.ServerPort ||
		sl.Peer.MTU != 9000 || sl.Peer.Master != b.BridgeDev || sl.Peer.NetNS != brIno {
		t.Errorf("the server's veth: %+v, peer %+v", sl, sl.Peer)
	}
	var full, segs uint64
	for _, r := range srvSnap.Drops.Retrans {
		if r.Local == addr {
			full, segs = full+r.Full, segs+r.Segments
		}
	}
	if segs == 0 || full != segs {
		t.Errorf("the server retransmitted %d segments, %d full-size: want only full-size ones", segs, full)
	}
	if len(srvSnap.Drops.LedgerElsewhere) == 0 || srvSnap.Drops.LedgerElsewhere[0].Flow.Key() != drop.Flow.Key() ||
		srvSnap.Drops.LedgerElsewhere[0].NetNS != brIno {
		t.Errorf("the bridge's drop of the server's flow is not first among its drops elsewhere: %+v", srvSnap.Drops.LedgerElsewhere)
	}
	var described bool
	for _, l := range srvSnap.Drops.Links {
		if l.NetNS == brIno && l.Name == b.ClientPort && l.MTU == 1500 && l.Master != nil && l.Master.Name == b.BridgeDev {
			described = true
		}
		if l.NetNS == brIno && l.Name == b.BridgeDev && (port(&l, b.ClientPort) == nil || port(&l, b.ServerPort) == nil) {
			t.Errorf("the bridge elsewhere without its ports: %+v", l)
		}
	}
	if !described {
		t.Errorf("the device of the drop elsewhere (%s, 1500, a port of %s) is not described: %+v", b.ClientPort, b.BridgeDev, srvSnap.Drops.Links)
	}
}
