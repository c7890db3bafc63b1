package sockdiag

import (
	"net/netip"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// tconn is one connection as a dump shows it: cookie, ports, the peer's
// address and its tcp_info.
func tconn(cookie uint64, sport, dport uint16, peer string, t TCPInfo) (InetDiagMsg, ConnInfo) {
	m := InetDiagMsg{Family: afInet, State: stateEstablished, SPort: sport, DPort: dport, Cookie: cookie}
	a := netip.MustParseAddr(peer).As4()
	copy(m.Dst[:], a[:])
	copy(m.Src[:], []byte{10, 0, 0, 1})
	if t.Size == 0 {
		t.Size = 280
	}
	if t.RTO == 0 {
		t.RTO = 250000
	}
	m.WQueue = t.NotsentBytes + t.Unacked*1448
	return m, ConnInfo{HasInfo: true, Info: t, Cong: "cubic", SndBuf: 87040}
}

var port80 = func() *[65536 / 64]uint64 {
	var l [65536 / 64]uint64
	l[80/64] |= 1 << (80 % 64)
	return &l
}()

// round runs one snapshot's round over the connections given.
func round(s *Senders, at time.Time, complete bool, looks ...func() (InetDiagMsg, ConnInfo)) *kernel.Senders {
	r := s.Begin(at, port80, 1)
	for _, l := range looks {
		m, c := l()
		r.Look(&m, &c)
	}
	return r.Finish(complete, "")
}

func look(cookie uint64, sport, dport uint16, peer string, t TCPInfo) func() (InetDiagMsg, ConnInfo) {
	return func() (InetDiagMsg, ConnInfo) { return tconn(cookie, sport, dport, peer, t) }
}

func listenerGroup(t *testing.T, s *kernel.Senders, port int) kernel.SenderGroup {
	t.Helper()
	for _, g := range s.Listeners {
		if g.Port == port {
			return g
		}
	}
	t.Fatalf("no listener group %d in %+v", port, s.Listeners)
	return kernel.SenderGroup{}
}

func peerGroup(t *testing.T, s *kernel.Senders, peer string) kernel.SenderGroup {
	t.Helper()
	for _, g := range s.Peers {
		if g.Peer == peer {
			return g
		}
	}
	t.Fatalf("no peer group %s in %+v", peer, s.Peers)
	return kernel.SenderGroup{}
}

// TestSendersAccounting follows four connections to port 80 through
// three snapshots: one that keeps sending, one whose end the kernel
// notified between two looks, one that vanished without a notice
// (accounted at its last look), and one that began and ended between
// two looks (its end's counters only). The window's deltas are what
// each did after the first snapshot.
func TestSendersAccounting(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s := NewSenders()
	first := round(s, t0, true,
		look(1, 80, 40001, "10.0.0.2", TCPInfo{BusyTime: 1000, RwndLimited: 400, BytesSent: 100}),
		look(2, 80, 40002, "10.0.0.2", TCPInfo{BusyTime: 2000, SndbufLimited: 500, BytesSent: 200}),
		look(3, 80, 40003, "10.0.0.3", TCPInfo{BusyTime: 3000, BytesSent: 300}))
	if g := listenerGroup(t, first, 80); g.Open != 3 || g.BusyUS != 6000 || g.Conns != 3 || g.Looks != 3 || !g.Since.Equal(t0) {
		t.Fatalf("first snapshot's listener group %+v", g)
	}
	// Between the looks: 2 ends (notified), and 4 begins and ends.
	m2, c2 := tconn(2, 80, 40002, "10.0.0.2", TCPInfo{Size: 280, BusyTime: 2600, SndbufLimited: 900, BytesSent: 260})
	s.End(&m2, &c2.Info)
	m4, c4 := tconn(4, 80, 40004, "10.0.0.3", TCPInfo{Size: 280, BusyTime: 70, BytesSent: 7})
	s.End(&m4, &c4.Info)
	// A dump that read 2 before its end still shows it: not counted again.
	second := round(s, t0.Add(time.Second), true,
		look(1, 80, 40001, "10.0.0.2", TCPInfo{BusyTime: 1500, RwndLimited: 700, BytesSent: 150}),
		look(2, 80, 40002, "10.0.0.2", TCPInfo{BusyTime: 2500, SndbufLimited: 800, BytesSent: 250}),
		look(3, 80, 40003, "10.0.0.3", TCPInfo{BusyTime: 3300, BytesSent: 330}))
	g := listenerGroup(t, second, 80)
	if g.Open != 2 || g.BusyUS != 1500+2600+3300+70 || g.Ended != 2 || g.Unlooked != 1 || g.Conns != 4 {
		t.Fatalf("second snapshot's listener group %+v", g)
	}
	// 3 is gone without a notice: accounted at its last look.
	third := round(s, t0.Add(2*time.Second), true,
		look(1, 80, 40001, "10.0.0.2", TCPInfo{BusyTime: 1800, RwndLimited: 900, BytesSent: 180}))
	g = listenerGroup(t, third, 80)
	if g.Open != 1 || g.Left != 1 || g.BusyUS != 1800+2600+3300+70 || g.RwndLimitedUS != 900 || g.SndbufLimitedUS != 900 {
		t.Fatalf("third snapshot's listener group %+v", g)
	}
	ls, ps := kernel.SenderDeltas(t0, []*kernel.Senders{first, second, third})
	if len(ls) != 1 || ls[0].BusyUS != 800+600+300+70 || ls[0].RwndLimitedUS != 500 || ls[0].SndbufLimitedUS != 400 || ls[0].Conns != 1 || ls[0].BytesSent != 80+60+30+7 {
		t.Errorf("window's listener delta %+v", ls)
	}
	if ls[0].CwndLimitedUS() != 1770-900 {
		t.Errorf("cwnd-limited %d", ls[0].CwndLimitedUS())
	}
	var p2, p3 kernel.SenderGroup
	for _, p := range ps {
		switch p.Peer {
		case "10.0.0.2":
			p2 = p
		case "10.0.0.3":
			p3 = p
		}
	}
	if !p2.Inbound || p2.BusyUS != 800+600 || p3.BusyUS != 300+70 {
		t.Errorf("window's peer deltas %+v", ps)
	}
	// A late notice of 3's end adds what it did after its last look.
	m3, c3 := tconn(3, 80, 40003, "10.0.0.3", TCPInfo{Size: 280, BusyTime: 3400, BytesSent: 340})
	s.End(&m3, &c3.Info)
	fourth := round(s, t0.Add(3*time.Second), true, look(1, 80, 40001, "10.0.0.2", TCPInfo{BusyTime: 1800, RwndLimited: 900, BytesSent: 180}))
	if g := listenerGroup(t, fourth, 80); g.BusyUS != 1800+2600+3400+70 || g.Left != 0 || g.Ended != 3 {
		t.Errorf("after a late end: %+v", g)
	}
}

// TestSendersIncompleteDump: connections a dump did not show are not
// taken as gone when it was incomplete; one that a complete dump missed
// and the next shows again is open again, counted once.
func TestSendersIncompleteDump(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s := NewSenders()
	round(s, t0, true, look(1, 80, 40001, "10.0.0.2", TCPInfo{BusyTime: 1000}))
	if g := listenerGroup(t, round(s, t0.Add(time.Second), false), 80); g.Left != 0 || g.BusyUS != 1000 {
		t.Errorf("after an incomplete dump: %+v", g)
	}
	if g := listenerGroup(t, round(s, t0.Add(2*time.Second), true), 80); g.Left != 1 || g.BusyUS != 1000 {
		t.Errorf("after a complete dump without it: %+v", g)
	}
	g := listenerGroup(t, round(s, t0.Add(3*time.Second), true, look(1, 80, 40001, "10.0.0.2", TCPInfo{BusyTime: 1500})), 80)
	if g.Left != 0 || g.BusyUS != 1500 || g.Conns != 1 || g.Open != 1 {
		t.Errorf("shown again: %+v", g)
	}
}

// TestSendersRestart: a connection idle longer than its RTO with a
// window of 300 segments at one look, and data sent by the next: an
// answer after idle, whose window the kernel restarted under CUBIC with
// tcp_slow_start_after_idle 1, not under BBR nor with the setting at 0.
// Zero windows and a full send buffer are counted by look.
func TestSendersRestart(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		cong     string
		sysctl   int
		restarts uint64
	}{{"cubic", "cubic", 1, 1}, {"bbr", "bbr", 1, 0}, {"cubic, setting 0", "cubic", 0, 0}, {"setting unknown", "reno", -1, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSenders()
			idle := TCPInfo{SndCwnd: 300, LastDataSent: 900, DataSegsOut: 400, RTT: 50000}
			sending := TCPInfo{SndCwnd: 40, Unacked: 40, NotsentBytes: 100000, DataSegsOut: 480, RTT: 50000}
			var out *kernel.Senders
			for i, ti := range []TCPInfo{idle, sending, sending} {
				r := s.Begin(t0.Add(time.Duration(i)*time.Second), port80, tc.sysctl)
				m, c := tconn(1, 80, 40001, "10.0.0.2", ti)
				c.Cong = tc.cong
				r.Look(&m, &c)
				out = r.Finish(true, "")
			}
			g := listenerGroup(t, out, 80)
			if g.IdleResumes != 1 || g.Restarts != tc.restarts || g.IdleLooks != 1 || g.CwndIdleSum != 300 || g.SendingLooks != 2 || g.CwndSendingSum != 80 {
				t.Errorf("%+v", g.SenderCounters)
			}
			if tc.restarts > 0 && g.RestartCwndSum != 300 {
				t.Errorf("restart from %d, want 300", g.RestartCwndSum)
			}
			if g.Cong[tc.cong] != 1 || g.NotSent != 100000 {
				t.Errorf("gauges %+v", g)
			}
		})
	}
	// Idle for less than the RTO: no restart is due.
	s := NewSenders()
	for i, ti := range []TCPInfo{{SndCwnd: 300, LastDataSent: 100, DataSegsOut: 4}, {SndCwnd: 300, DataSegsOut: 9}} {
		r := s.Begin(t0.Add(time.Duration(i)*time.Second), port80, 1)
		m, c := tconn(1, 80, 40001, "10.0.0.2", ti)
		r.Look(&m, &c)
		if g := listenerGroup(t, r.Finish(true, ""), 80); g.IdleResumes != 0 || g.IdleLooks != 0 {
			t.Errorf("idle shorter than the RTO: %+v", g.SenderCounters)
		}
	}
	// A slow reader: its window at zero, the sender probing it, the
	// send buffer full.
	s = NewSenders()
	r := s.Begin(t0, port80, 1)
	m, c := tconn(1, 80, 40001, "10.0.0.2", TCPInfo{SndCwnd: 10, NotsentBytes: 80000, Probes: 2})
	m.Timer = timerProbe
	c.WmemQueued = c.SndBuf + 1
	r.Look(&m, &c)
	out := r.Finish(true, "")
	if g := listenerGroup(t, out, 80); g.ZeroWindowLooks != 1 || g.SndbufFullLooks != 1 || g.ZeroWindow != 1 {
		t.Errorf("slow reader %+v", g)
	}
	if len(out.Conns) != 1 || out.Conns[0].Timer != "probe" || out.Conns[0].Probes != 2 || out.Conns[0].SndWnd != 0 || out.Conns[0].Remote != "10.0.0.2:40001" || !out.Conns[0].Inbound {
		t.Errorf("conns %+v", out.Conns)
	}
}

// TestSendersBounds: peers beyond MaxSenderPeers and connections beyond
// MaxSenderConns are left out of a snapshot, the busiest since the
// previous one kept; connections made from here group by destination.
func TestSendersBounds(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	s := NewSenders()
	var looks []func() (InetDiagMsg, ConnInfo)
	for i := range 100 {
		looks = append(looks, look(uint64(i+1), 80, uint16(40000+i), netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}).String(), TCPInfo{BusyTime: 1000}))
	}
	looks = append(looks, look(1000, 50000, 5432, "10.2.0.1", TCPInfo{BusyTime: 1000}))
	round(s, t0, true, looks...)
	looks = looks[:0]
	for i := range 100 {
		looks = append(looks, look(uint64(i+1), 80, uint16(40000+i), netip.AddrFrom4([4]byte{10, 1, 0, byte(i)}).String(), TCPInfo{BusyTime: 1000 + uint64(i)*10}))
	}
	looks = append(looks, look(1000, 50000, 5432, "10.2.0.1", TCPInfo{BusyTime: 9000}))
	out := round(s, t0.Add(time.Second), true, looks...)
	if len(out.Peers) != kernel.MaxSenderPeers || len(out.Conns) != kernel.MaxSenderConns {
		t.Fatalf("%d peers, %d conns", len(out.Peers), len(out.Conns))
	}
	if p := out.Peers[0]; p.Peer != "10.2.0.1:5432" || p.Inbound || p.BusyUS != 9000 {
		t.Errorf("busiest peer %+v", p)
	}
	if p := out.Peers[1]; p.Peer != "10.1.0.99" {
		t.Errorf("second busiest peer %+v", p)
	}
	if c := out.Conns[0]; c.Remote != "10.2.0.1:5432" || c.BusySinceUS != 8000 || c.Inbound {
		t.Errorf("busiest connection %+v", c)
	}
	if len(out.Listeners) != 1 || out.Listeners[0].Open != 100 {
		t.Errorf("listeners %+v", out.Listeners)
	}
}
