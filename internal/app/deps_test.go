package app

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// TestOutstanding: a look decides a request outstanding, with nothing
// of its answer received, from the ages tcp_info gives in ms (jiffies:
// equal ages are the same 4 ms tick); any other waits for the next
// movement.
func TestOutstanding(t *testing.T) {
	for _, tc := range []struct {
		name                string
		sent, recv, ack, un uint32
		out                 bool
	}{
		{"sent after the last answer", 10, 50, 50, 0, true},
		// An answer whole, or only begun (its headers, a part Nagle
		// split off): the next movement says which.
		{"received after the request", 50, 10, 10, 0, false},
		{"sent in the answer's tick, not yet acknowledged", 20, 20, 20, 1, true},
		// A saturated pool to a dependency that queues: the next request
		// left in the answer's tick, and the peer's kernel acknowledged it
		// 40 ms later, its application not having answered.
		{"sent in the answer's tick, acknowledged alone since", 60, 60, 20, 0, true},
		// Request, answer and ACK in one tick: a fast dependency's answer
		// carrying the ACK, or a saturated pool's next request
		// acknowledged at once.
		{"request, answer and ACK in one tick", 60, 60, 60, 0, false},
		// A new connection's first request, sent in the tick its
		// handshake ended and acknowledged at once: nothing came back.
		{"the first request, nothing received", 60, 60, 60, 0, true},
		// An idle pool connection whose keepalive probe (Go's, after
		// 15 s of silence) the peer acknowledged 2 s ago.
		{"idle, a keepalive probe acknowledged since", 30000, 30000, 2000, 0, false},
		// A request acknowledged alone at the peer's longest delayed
		// ACK, and one a keepalive's time after its send.
		{"sent in the answer's tick, acknowledged alone 200 ms later", 300, 300, 100, 0, true},
		{"sent in the answer's tick, an ACK 15 s later", 16000, 16000, 1000, 0, false},
	} {
		ti := sockdiag.TCPInfo{Size: 232, DataSegsOut: 9, DataSegsIn: 8, LastDataSent: tc.sent, LastDataRecv: tc.recv, LastAckRecv: tc.ack, Unacked: tc.un}
		if strings.HasPrefix(tc.name, "the first request") {
			ti.DataSegsOut, ti.DataSegsIn = 1, 0
		}
		if got := outstanding(&ti); got != tc.out {
			t.Errorf("%s: outstanding %v, want %v", tc.name, got, tc.out)
		}
	}
}

// exchange is one connection's requests and answers, in seconds from the
// trace's first look: request i goes out at sends[i] (one segment of
// reqBytes) and its answer comes in parts at parts[i] (one segment
// each, partBytes[j] bytes, or answerBytes split evenly). The peer's
// kernel acknowledges a request with the answer's first part, or alone
// at ackAfter when that is set and earlier.
type exchange struct {
	sends     []float64
	parts     [][]float64
	partBytes [][]int
	reqBytes  int
	ackAfter  float64
	ato       uint32
	// keepalives are when the peer acknowledged a keepalive probe: an
	// ACK of nothing new, after the last data.
	keepalives []float64
}

// serial builds an exchange of back-to-back requests from start to end:
// each answered in parts at offsets (seconds after its send) of the
// given sizes, the next sent gap after the last part.
func serial(start, end, gap float64, offsets []float64, sizes ...int) exchange {
	var x exchange
	x.reqBytes = 80
	for s := start; s < end+1; {
		x.sends = append(x.sends, s)
		var p []float64
		for _, o := range offsets {
			p = append(p, s+o)
		}
		x.parts = append(x.parts, p)
		x.partBytes = append(x.partBytes, sizes)
		s = p[len(p)-1] + gap
	}
	return x
}

// info is tcp_info at now (seconds), with ages in 4 ms jiffies.
func (x exchange) info(now float64) sockdiag.TCPInfo {
	const jiffy = 0.004
	tick := func(s float64) int64 { return int64(math.Floor(s / jiffy)) }
	age := func(s float64) uint32 {
		if s < -50 {
			return 1 << 20
		}
		return uint32((tick(now) - tick(s)) * 4)
	}
	ti := sockdiag.TCPInfo{Size: 232, SndCwnd: 10, Ato: x.ato}
	lastSend, lastRecv, lastAck := -100.0, -100.0, -100.0
	for i, s := range x.sends {
		if s > now {
			break
		}
		ti.DataSegsOut++
		ti.SegsOut++
		ti.BytesSent += uint64(x.reqBytes)
		lastSend = s
		acked := x.parts[i][0]
		if x.ackAfter > 0 && s+x.ackAfter < acked {
			acked = s + x.ackAfter
			if acked <= now {
				ti.SegsIn++
			}
		}
		if acked <= now {
			lastAck = max(lastAck, acked)
			ti.BytesAcked += uint64(x.reqBytes)
		} else {
			ti.Unacked = 1
		}
		for j, p := range x.parts[i] {
			if p > now {
				break
			}
			ti.DataSegsIn++
			ti.SegsIn++
			n := 100
			if j < len(x.partBytes[i]) {
				n = x.partBytes[i][j]
			}
			ti.BytesReceived += uint64(n)
			lastRecv = max(lastRecv, p)
			lastAck = max(lastAck, p)
		}
	}
	for _, k := range x.keepalives {
		if k <= now {
			ti.SegsIn++
			lastAck = max(lastAck, k)
		}
	}
	ti.LastDataSent, ti.LastDataRecv, ti.LastAckRecv = age(lastSend), age(lastRecv), age(lastAck)
	return ti
}

// replayExchange looks at c as the tracer does, every 100 ms from 0 to
// end (seconds), with its probes between looks.
func replayExchange(c *connTrace, t0 time.Time, end float64, x exchange) {
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	for i := 0; float64(i)*0.1 <= end+1e-9; i++ {
		now := float64(i) * 0.1
		ti := x.info(now)
		c.sample(at(now), &ti, i, 10)
		for !c.probeAt.IsZero() {
			p := c.probeAt.Sub(t0).Seconds()
			if p >= now+0.1-1e-9 || p > end {
				break
			}
			ti := x.info(p)
			c.probe(at(p), &ti)
		}
	}
}

// TestDependenciesExchange: the busy share and time per round trip of
// pools whose connections carry real exchanges, looked at every 100 ms
// with probes between: answers in several parts paused midway (headers
// first), one-segment answers to requests the peer acknowledges at once,
// all the next request leaving in the microseconds after the answer (a
// saturated pool, where the movements' order is lost and the lattice
// places the looks); a roomy pool; a fast dependency; answers of several
// sizes, where nothing but tcp_info's own order holds; answers whose
// last part waits for the client's delayed ACK (40 ms).
func TestDependenciesExchange(t *testing.T) {
	api := &Server{Kind: "api"}
	t0 := time.Now()
	headers := []float64{0.0001, 0.020, 0.0201, 0.0202}
	for _, tc := range []struct {
		name     string
		conns    func(i int) exchange
		busy     float64 // ± 0.05; -1: not timed
		rt       time.Duration
		pause    bool // answers pause for the delayed-ACK timeout
		nagleNil bool
	}{
		{"saturated, headers first and the body 20 ms later", func(i int) exchange {
			return serial(-0.013*float64(i), 3, 0.0002, headers, 66, 100, 100, 100)
		}, 1, 20 * time.Millisecond, false, true},
		{"saturated, one-segment answers, requests acknowledged at once", func(i int) exchange {
			x := serial(-0.007*float64(i), 3, 0.00005, []float64{0.020}, 7)
			x.ackAfter = 0.0001
			return x
		}, 1, 20 * time.Millisecond, false, true},
		{"roomy pool, headers first", func(i int) exchange {
			return serial(-0.013*float64(i), 3, 0.060, headers, 66, 100, 100, 100)
		}, 0.25, 20 * time.Millisecond, false, true},
		{"fast dependency, long pauses", func(i int) exchange {
			return serial(0.013+0.011*float64(i), 3, 0.2491, []float64{0.0001}, 7)
		}, 0, 0, false, true},
		// A pool idle past its keepalive time before the trace (one
		// exchange 30 s before, probes acknowledged 15 s and 0.3 s
		// before), then a fast backend asked some 5 times each 100 ms.
		{"fast dependency, idle past its keepalive before", func(i int) exchange {
			x := serial(0.5+0.003*float64(i), 3, 0.0197, []float64{0.0003}, 7)
			x.sends = append([]float64{-30}, x.sends...)
			x.parts = append([][]float64{{-29.9997}}, x.parts...)
			x.partBytes = append([][]int{{7}}, x.partBytes...)
			x.keepalives = []float64{-15, -0.3}
			return x
		}, 0.015, 300 * time.Microsecond, false, true},
		{"answers of several sizes, headers first, saturated", func(i int) exchange {
			x := serial(-0.013*float64(i), 3, 0.0002, headers, 66, 100, 100, 100)
			for j := range x.partBytes {
				x.partBytes[j] = []int{60 + j%7, 100 + j%5, 100, 100 + j%3}
			}
			return x
		}, -1, 0, false, true},
		{"the body held 40 ms for the delayed ACK", func(i int) exchange {
			x := serial(-0.011*float64(i), 3, 0.0002, []float64{0.0001, 0.0402}, 66, 300)
			x.ato = 40000
			return x
		}, 1, 40 * time.Millisecond, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns []*connTrace
			for i := range 4 {
				c := &connTrace{srv: api, dst: "backend:80"}
				replayExchange(c, t0, 3, tc.conns(i))
				conns = append(conns, c)
			}
			deps := dependencies(conns, nil)[api]
			if len(deps) != 1 {
				t.Fatalf("rows %+v", deps)
			}
			d := deps[0]
			t.Logf("busy %.3f, %v per round trip (%d timed), %q", d.Busy, d.RoundTrip, d.RoundTripsTimed, d.Untimed)
			if tc.busy < 0 {
				if d.Untimed == "" || d.Busy != 0 || d.RoundTrip != 0 || d.RoundTripsPerSec == 0 {
					t.Errorf("%+v, want untimed, its round trips counted", d)
				}
				return
			}
			if d.Untimed != "" || math.Abs(d.Busy-tc.busy) > 0.05 {
				t.Errorf("busy %.3f (%q), want %.2f", d.Busy, d.Untimed, tc.busy)
			}
			if lo, hi := tc.rt*95/100, tc.rt*105/100+time.Millisecond; d.RoundTrip < lo || d.RoundTrip > hi {
				t.Errorf("round trip %v, want %v within 5 %%", d.RoundTrip, tc.rt)
			}
			if got := d.Nagle.PauseNearAto(); got != tc.pause || (d.Nagle == nil) != tc.nagleNil {
				t.Errorf("nagle %+v: pause near the delayed-ACK timeout %v, want %v", d.Nagle, got, tc.pause)
			}
		})
	}
}

// TestDependenciesPipelined: requests that go out while earlier ones
// are outstanding (a request every 150 ms, each answered 400 ms later)
// make the pool multiplexed: no time per round trip is claimed for it.
func TestDependenciesPipelined(t *testing.T) {
	api := &Server{Kind: "api"}
	var x exchange
	x.reqBytes = 80
	for s := -0.3; s < 4; s += 0.15 {
		x.sends = append(x.sends, s)
		x.parts = append(x.parts, []float64{s + 0.4})
		x.partBytes = append(x.partBytes, []int{7})
	}
	c := &connTrace{srv: api, dst: "backend:80"}
	replayExchange(c, time.Now(), 3, x)
	d := dependencies([]*connTrace{c}, nil)[api][0]
	if !d.Multiplexed() {
		t.Errorf("pipelined %.2f, want multiplexed: %+v", d.Pipelined, d)
	}
}

// TestLattice: the answer size and the place of a look with nothing of
// its answer, on a connection whose answers are one size; none where
// they are not, or too few requests were seen.
func TestLattice(t *testing.T) {
	mk := func(n int, size func(i int) uint64, states ...lookState) *connTrace {
		c := &connTrace{}
		var in uint64 = 500 // a greeting and its handshake
		var out uint32 = 3
		for i := range n {
			st := lookOpen
			if i < len(states) {
				st = states[i]
			}
			// Looks alternately waiting for the answer and halfway in it.
			l := connLook{in: in, out: out + 1, w: 1, state: st}
			if i%2 == 1 {
				l.in += size(i) / 2
				l.state = lookOpen
			}
			c.looks = append(c.looks, l)
			in += size(i)
			out++
		}
		return c
	}
	one := func(int) uint64 { return 366 }
	if a, z0, ok := mk(20, one, lookOut).lattice(); !ok || a != 366 || z0 != 500-3*366 {
		t.Errorf("one size: a %d, z0 %d, %v; want 366, %d", a, z0, ok, 500-3*366)
	}
	if _, _, ok := mk(20, one).lattice(); ok {
		t.Errorf("no anchor, a greeting: the place of an idle look is unknown")
	}
	if _, _, ok := mk(20, func(i int) uint64 { return 300 + uint64(i*37%200) }, lookOut).lattice(); ok {
		t.Errorf("answers of several sizes fit a lattice")
	}
	if _, _, ok := mk(5, one, lookOut).lattice(); ok {
		t.Errorf("5 requests fit a lattice")
	}
}

// TestUnixOutbound: which unix stream sockets are connections a server
// opened to another process's listener.
func TestUnixOutbound(t *testing.T) {
	listening := func(p string) bool { return p == "/run/php/php8.2-fpm.sock" || p == "/run/app.sock" }
	for _, tc := range []struct {
		name string
		fd   int
		u    unixEnds
		want bool
	}{
		{"a client of php-fpm's socket", 7, unixEnds{peer: "/run/php/php8.2-fpm.sock"}, true},
		{"an abstract name", 7, unixEnds{peer: "@pgbouncer"}, true},
		{"a client that bound a name of its own", 7, unixEnds{own: "@client-1", peer: "/run/php/php8.2-fpm.sock"}, true},
		{"a connection it accepted", 7, unixEnds{own: "/run/app.sock"}, false},
		{"one it accepted from a named client", 7, unixEnds{own: "/run/app.sock", peer: "@client-1"}, false},
		{"a socketpair", 7, unixEnds{}, false},
		{"stdout to journald", 1, unixEnds{peer: "/run/systemd/journal/stdout"}, false},
		{"a journal stream on another descriptor", 9, unixEnds{peer: "/run/systemd/journal/stdout"}, false},
		{"syslog over a stream", 9, unixEnds{peer: "/dev/log"}, false},
		{"the system bus", 9, unixEnds{peer: "/run/dbus/system_bus_socket"}, false},
		{"systemd-resolved's varlink", 9, unixEnds{peer: "/run/systemd/resolve/io.systemd.Resolve"}, true},
		{"stdin", 0, unixEnds{peer: "/run/app2.sock"}, false},
	} {
		if got := unixOutbound(tc.fd, &tc.u, listening); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestDependenciesUnix: unix connections grouped per server and path:
// the connections seen twice or more, the new ones, the share of looks
// with a request unread at the dependency; no time, and the owner asked
// for. A TCP destination beside it keeps its estimates.
func TestDependenciesUnix(t *testing.T) {
	api := &Server{Kind: "api"}
	t0 := time.Now()
	look := func(c *connTrace, unread ...bool) *connTrace {
		for i, u := range unread {
			var m sockdiag.UnixDiagMsg
			m.HasRQ = true
			if u {
				m.WQueue = 768
			}
			c.sampleUnix(t0.Add(time.Duration(i)*100*time.Millisecond), &m)
		}
		return c
	}
	dst := "unix:/run/php/php8.2-fpm.sock"
	conns := []*connTrace{
		look(&connTrace{srv: api, dst: dst, unix: true}, true, true, false, false),
		look(&connTrace{srv: api, dst: dst, unix: true}, false, false, false, true),
		// Opened during the trace and gone before its second look.
		look(&connTrace{srv: api, dst: dst, unix: true, isNew: true}, true),
		look(&connTrace{srv: api, dst: "unix:@only-short", unix: true, isNew: true}, false),
		// Never looked at: gone before its first sample.
		{srv: api, dst: "unix:@never", unix: true, isNew: true},
	}
	var asked []string
	deps := dependencies(conns, func(d *Dependency) { asked = append(asked, d.Addr); d.Owner = "php-fpm (pid 9)" })[api]
	if len(deps) != 2 {
		t.Fatalf("%d rows, want 2: %+v", len(deps), deps)
	}
	d, short := deps[0], deps[1]
	if d.Addr != dst || d.Conns != 2 || d.New != 1 || d.Untimed != UnixUntimed || d.Samples != 4 || d.Owner != "php-fpm (pid 9)" {
		t.Errorf("row %+v", d)
	}
	if d.Unread != 3.0/8 || d.Busy != 0 || d.RoundTrip != 0 || d.RoundTripsPerSec != 0 {
		t.Errorf("unread %.3f (want 3/8), busy %.2f, round trip %v: no timing", d.Unread, d.Busy, d.RoundTrip)
	}
	if d.Seconds < 0.29 || d.Seconds > 0.31 {
		t.Errorf("seconds %.2f, want 0.3", d.Seconds)
	}
	if short.Addr != "unix:@only-short" || short.Conns != 0 || short.New != 1 || short.Untimed == "" {
		t.Errorf("short row %+v", short)
	}
	if len(asked) != 2 {
		t.Errorf("owner asked for %v", asked)
	}
}

// TestDependenciesPaired: round trips longer than the interval between
// looks are timed one by one, the one outstanding when the trace began
// among them. 20 connections each holding a 2 s request begun together
// 0.5 s before a 5 s trace read 2.49 s per round trip from busy time over
// requests sent (the first request's time counted, not the request);
// fast round trips, several between two looks or within one jiffy, keep
// that estimate.
func TestDependenciesPaired(t *testing.T) {
	api := &Server{Kind: "api"}
	t0 := time.Now()
	for _, tc := range []struct {
		name     string
		rt, gap  float64 // seconds: each request, and between an answer and the next request
		start    float64 // the first request's send, from the trace's first look
		end      float64 // the trace's last look
		conns    int
		ack      float64 // the peer acknowledges each request alone after that long (0: with its answer)
		timed    bool    // timed one by one
		lo, hi   time.Duration
		busyOver float64
	}{
		{"2 s requests begun before the trace", 2, 0.01, -0.5, 5, 20, 0.0001, true, 1990 * time.Millisecond, 2010 * time.Millisecond, 0.95},
		{"300 ms requests with pauses", 0.3, 0.25, -0.1, 5, 4, 0, true, 296 * time.Millisecond, 304 * time.Millisecond, 0.5},
		// A saturated pool to a dependency that reads each request at
		// once: the next request leaves in the answer's jiffy and is
		// acknowledged in it, so no look after the first request's
		// decides; the lattice confirms the round trips.
		{"400 ms requests sent in the previous answer's jiffy", 0.4, 0, -0.1, 5, 4, 0.0001, true, 396 * time.Millisecond, 404 * time.Millisecond, 0.95},
		// Request and answer in one jiffy, then a pause longer than
		// between two looks: a "round trip" from one to the next answer
		// would be the pause.
		{"0.1 ms requests with long pauses", 0.0001, 0.2492, 0.013, 5, 4, 0, false, 0, 10 * time.Millisecond, 0},
		{"20 ms requests, several between looks", 0.02, 0.005, 0, 5, 4, 0, false, 15 * time.Millisecond, 25 * time.Millisecond, 0.7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns []*connTrace
			for range tc.conns {
				c := &connTrace{srv: api, dst: "backend:80"}
				x := serial(tc.start, tc.end+tc.rt, tc.gap, []float64{tc.rt}, 7)
				x.ackAfter = tc.ack
				replayExchange(c, t0, tc.end, x)
				conns = append(conns, c)
			}
			deps := dependencies(conns, nil)[api]
			if len(deps) != 1 {
				t.Fatalf("rows %+v", deps)
			}
			d := deps[0]
			if d.RoundTrip < tc.lo || d.RoundTrip > tc.hi || (d.RoundTripsTimed > 0) != tc.timed || d.Busy < tc.busyOver {
				t.Errorf("round trip %v (%d timed one by one), busy %.2f; want %v to %v, timed %v, busy over %.2f", d.RoundTrip, d.RoundTripsTimed, d.Busy, tc.lo, tc.hi, tc.timed, tc.busyOver)
			}
		})
	}
}

// TestDependenciesLongTrace: past maxLooks a connection keeps no more
// looks, and the lattice of those it kept places the rest: a saturated
// pool with headers first reads busy over 130 s, none of its looks lost.
func TestDependenciesLongTrace(t *testing.T) {
	api := &Server{Kind: "api"}
	c := &connTrace{srv: api, dst: "backend:80"}
	replayExchange(c, time.Now(), 130, serial(-0.013, 130, 0.0002, []float64{0.0001, 0.020, 0.0201, 0.0202}, 66, 100, 100, 100))
	d := dependencies([]*connTrace{c}, nil)[api][0]
	if len(c.looks) != maxLooks || !c.frozen || c.lost > 0 || d.Busy < 0.95 || d.RoundTrip < 19*time.Millisecond || d.RoundTrip > 21*time.Millisecond {
		t.Errorf("%d looks kept, frozen %v, %d lost; busy %.2f, %v per round trip", len(c.looks), c.frozen, c.lost, d.Busy, d.RoundTrip)
	}
}
