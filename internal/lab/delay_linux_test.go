package lab

import (
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// newLinked is a lab with a delay element, closed when the test ends.
func newLinked(t *testing.T, id string, l Link) *Env {
	t.Helper()
	skipUnlessRoot(t)
	e, err := NewLinked(id, l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// TestDelayRTT: with 25 ms each way, a ping and a TCP exchange between
// the client and the server take 50 ms, give or take what timers and a
// busy machine add (within 45–58 ms at the median), and TCP's own RTT
// says so; the element dropped nothing.
func TestDelayRTT(t *testing.T) {
	e := newLinked(t, "dr"+strconv.Itoa(os.Getpid()%10000), Link{Delay: 25 * time.Millisecond})
	pings := ping(t, e.ClientNS, e.ServerIP, 15)
	t.Logf("ping: %v", pings)
	checkMedian(t, "ping", pings, 45*time.Millisecond, 58*time.Millisecond)

	ln := listenIn(t, e.ServerNS, e.ServerIP+":7300")
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // an echo
	}()
	var c net.Conn
	start := time.Now()
	if err := e.ClientNS.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", e.ServerIP+":7300", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connect := time.Since(start)
	var rtts []time.Duration
	b := make([]byte, 64)
	for range 10 {
		start := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, time.Since(start))
	}
	ti := tcpInfo(t, c)
	t.Logf("connect %v, exchanges %v, tcp_info rtt %v min_rtt %v", connect, rtts, time.Duration(ti.Rtt)*time.Microsecond, time.Duration(ti.Min_rtt)*time.Microsecond)
	checkMedian(t, "tcp exchange", rtts, 45*time.Millisecond, 58*time.Millisecond)
	if connect < 45*time.Millisecond || connect > 200*time.Millisecond {
		t.Errorf("connect took %v, want a round trip of 50 ms", connect)
	}
	if m := time.Duration(ti.Min_rtt) * time.Microsecond; m < 48*time.Millisecond || m > 58*time.Millisecond {
		t.Errorf("tcp_info min_rtt %v, want 50 ms", m)
	}
	ab, ba := e.Delay().Stats()
	t.Logf("client→server %+v; server→client %+v", ab, ba)
	if ab.Dropped+ba.Dropped+ab.SendErrors+ba.SendErrors+ab.Truncated+ba.Truncated > 0 || ab.Frames == 0 || ba.Frames == 0 {
		t.Errorf("stats %+v %+v", ab, ba)
	}
}

// TestDelayRate: at 1.25 MB/s (10 Mbit/s) and 5 ms each way, a bulk
// transfer of 4 MiB moves at the rate, within 15 % (TCP's ramp up and
// headers take their part), and the queue's bound holds.
func TestDelayRate(t *testing.T) {
	const rate = 1250000
	e := newLinked(t, "dq"+strconv.Itoa(os.Getpid()%10000), Link{Delay: 5 * time.Millisecond, Rate: rate, Queue: 1 << 20})
	ln := listenIn(t, e.ServerNS, e.ServerIP+":7301")
	const size = 4 << 20
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write(make([]byte, size))
	}()
	var c net.Conn
	if err := e.ClientNS.Do(func() error {
		var err error
		c, err = net.DialTimeout("tcp", e.ServerIP+":7301", 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	took := time.Since(start)
	if err != nil || n != size {
		t.Fatalf("read %d of %d: %v", n, size, err)
	}
	got := float64(n) / took.Seconds()
	ab, ba := e.Delay().Stats()
	t.Logf("%d bytes in %v: %.0f B/s for %d B/s; server→client %+v; client→server %+v", n, took, got, rate, ba, ab)
	if got < 0.85*rate || got > 1.05*rate {
		t.Errorf("%.0f B/s through a link of %d B/s", got, rate)
	}
	if ba.MaxQueued > 1<<20 {
		t.Errorf("held %d bytes, bound 1 MiB", ba.MaxQueued)
	}
}

// TestDelayClose: Close stops the element and removes its namespace
// with the others; a second Close does nothing.
func TestDelayClose(t *testing.T) {
	skipUnlessRoot(t)
	id := "dc" + strconv.Itoa(os.Getpid()%10000)
	e, err := NewLinked(id, Link{Delay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	names, err := netns.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{e.ServerNS.Name, e.ClientNS.Name, "nd-" + id + "-dly"} {
		if slices.Contains(names, n) {
			t.Errorf("%s left behind", n)
		}
	}
	// A link the element cannot use fails before anything runs.
	if _, err := StartDelay(netns.NS{}, "nd-no-such-link", "lo", Link{}); err == nil {
		t.Error("a delay element on a link that does not exist")
	}
}

// ping sends n ICMP echo requests from namespace ns to addr, one after
// the other, and returns their round trips.
func ping(t *testing.T, ns netns.NS, addr string, n int) []time.Duration {
	t.Helper()
	var pc *icmp.PacketConn
	if err := ns.Do(func() error {
		var err error
		pc, err = icmp.ListenPacket("ip4:icmp", "0.0.0.0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	dst := &net.IPAddr{IP: net.ParseIP(addr)}
	var out []time.Duration
	buf := make([]byte, 1500)
	for seq := 1; seq <= n; seq++ {
		msg := icmp.Message{Type: ipv4.ICMPTypeEcho, Body: &icmp.Echo{ID: os.Getpid() & 0xffff, Seq: seq, Data: []byte("netdoctor")}}
		b, err := msg.Marshal(nil)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if _, err := pc.WriteTo(b, dst); err != nil {
			t.Fatal(err)
		}
		pc.SetReadDeadline(time.Now().Add(3 * time.Second))
		for {
			k, _, err := pc.ReadFrom(buf)
			if err != nil {
				t.Fatalf("ping %d: %v", seq, err)
			}
			r, err := icmp.ParseMessage(1, buf[:k])
			if err != nil || r.Type != ipv4.ICMPTypeEchoReply {
				continue
			}
			if echo, ok := r.Body.(*icmp.Echo); ok && echo.Seq == seq {
				break
			}
		}
		out = append(out, time.Since(start))
	}
	return out
}

// listenIn listens on addr in namespace ns, closed when the test ends.
func listenIn(t *testing.T, ns netns.NS, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func tcpInfo(t *testing.T, c net.Conn) *unix.TCPInfo {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ti *unix.TCPInfo
	var gerr error
	rc.Control(func(fd uintptr) { ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if gerr != nil {
		t.Fatal(gerr)
	}
	return ti
}

// checkMedian fails the test when the median of d is outside [lo, hi].
func checkMedian(t *testing.T, what string, d []time.Duration, lo, hi time.Duration) {
	t.Helper()
	s := slices.Clone(d)
	slices.Sort(s)
	if m := s[len(s)/2]; m < lo || m > hi {
		t.Errorf("%s: median %v, want %v–%v (%v)", what, m, lo, hi, d)
	}
}
