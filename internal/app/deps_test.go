package app

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// TestObserveBusy: when a request is outstanding, from the ages tcp_info
// gives in ms (jiffies: equal ages are the same 4 ms tick).
func TestObserveBusy(t *testing.T) {
	for _, tc := range []struct {
		name                string
		sent, recv, ack, un uint32
		busy, undecided     bool
	}{
		{"sent after the last answer", 10, 50, 50, 0, true, false},
		{"answered after the request", 50, 10, 10, 0, false, false},
		{"sent in the answer's tick, not yet acknowledged", 20, 20, 20, 1, true, false},
		// A saturated pool to a dependency that queues: the next request
		// left in the answer's tick, and the peer's kernel acknowledged it
		// 40 ms later, its application not having answered.
		{"sent in the answer's tick, acknowledged alone since", 60, 60, 20, 0, true, false},
		// Request, answer and ACK in one tick: a fast dependency's answer
		// carrying the ACK, or a saturated pool's next request
		// acknowledged at once. The sample decides nothing.
		{"request, answer and ACK in one tick", 60, 60, 60, 0, false, true},
		// A new connection's first request, sent in the tick its
		// handshake ended and acknowledged at once: nothing came back.
		{"the first request, nothing received", 60, 60, 60, 0, true, false},
	} {
		c := &connTrace{}
		ti := sockdiag.TCPInfo{Size: 232, DataSegsOut: 9, DataSegsIn: 8, LastDataSent: tc.sent, LastDataRecv: tc.recv, LastAckRecv: tc.ack, Unacked: tc.un}
		if strings.HasPrefix(tc.name, "the first request") {
			ti.DataSegsOut, ti.DataSegsIn = 1, 0
		}
		c.observe(time.Now(), &ti)
		if got := c.busy == 1; got != tc.busy || (c.decided == 0) != tc.undecided {
			t.Errorf("%s: busy %v, decided %d, want busy %v, undecided %v", tc.name, got, c.decided, tc.busy, tc.undecided)
		}
	}
}

// TestDependenciesBySegs: samples whose jiffies decide nothing
// (request, answer and ACK in one tick) are settled by data segments out
// less in, calibrated on the pool's decided samples: busy on a saturated
// pool whose dependency reads each request at once (even on a connection
// never caught deciding), idle on a fast dependency's sub-jiffy round
// trips. A pool whose looks mostly stay undecided is not timed: one
// difference seen both busy and idle (answers of several segments), one
// never seen decided, or a calibration from too few of its connections.
func TestDependenciesBySegs(t *testing.T) {
	api := &Server{Kind: "api"}
	t0 := time.Now()
	// look feeds one sample per letter: b busy (sent after the answer),
	// i idle (answered after the request), u undecided; segs is the
	// difference out − in at each (1 when not given).
	look := func(kinds string, segs ...uint32) *connTrace {
		c := &connTrace{srv: api, dst: "db:1"}
		var out uint32 = 1000
		for i, k := range kinds {
			d := uint32(1)
			if i < len(segs) {
				d = segs[i]
			}
			ti := sockdiag.TCPInfo{Size: 232, DataSegsOut: out + uint32(i)*10, DataSegsIn: out + uint32(i)*10 - d}
			switch k {
			case 'b':
				ti.LastDataSent, ti.LastDataRecv, ti.LastAckRecv = 10, 50, 10
			case 'i':
				ti.LastDataSent, ti.LastDataRecv, ti.LastAckRecv = 50, 10, 10
			case 'u':
				ti.LastDataSent, ti.LastDataRecv, ti.LastAckRecv = 30, 30, 30
			}
			c.observe(t0.Add(time.Duration(i)*100*time.Millisecond), &ti)
			c.tick = i
		}
		return c
	}
	pool := func(n int, first ...*connTrace) []*connTrace {
		for len(first) < n {
			first = append(first, look("uuuuuuuuuu"))
		}
		return first
	}
	for _, tc := range []struct {
		name  string
		conns []*connTrace
		busy  float64 // -1: not timed
	}{
		{"saturated pool, the request read at once", []*connTrace{
			look("buuuuuuuuu"),
			look("uuuuuuuuuu"), // never decided: the pool's calibration
		}, 1},
		{"two of eight connections calibrate", pool(8, look("bbuuuuuuuu"), look("buuuuuuuuu")), 1},
		{"one of eight is too few", pool(8, look("bbbbbbbbbu")), -1},
		{"fast dependency, sub-jiffy round trips", []*connTrace{
			look("iuuuuuuuub", 0, 0, 0, 0, 0, 0, 0, 0, 0, 1),
		}, 0.1},
		{"answers of several segments", []*connTrace{
			look("biuuuuuuuu", 3, 3, 3, 3, 3, 3, 3, 3, 3, 3),
		}, -1},
		{"a difference never seen decided", []*connTrace{
			look("bbuuuuuuuu", 1, 1, 2, 2, 2, 2, 2, 2, 2, 2),
		}, -1},
		{"a quarter undecided", []*connTrace{
			look("bbbbbbbuuu", 1, 1, 1, 1, 1, 1, 1, 2, 2, 2),
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			deps := dependencies(tc.conns, nil)[api]
			if len(deps) != 1 {
				t.Fatalf("rows %+v", deps)
			}
			d := deps[0]
			if tc.busy < 0 {
				if d.Untimed == "" || d.Busy != 0 || d.RoundTrip != 0 || d.RoundTripsPerSec == 0 || d.Conns != len(tc.conns) {
					t.Errorf("%+v, want untimed, its connections and round trips counted", d)
				}
				return
			}
			if d.Untimed != "" || d.Busy < tc.busy-0.01 || d.Busy > tc.busy+0.01 {
				t.Errorf("busy %.3f (%q), want %.2f", d.Busy, d.Untimed, tc.busy)
			}
		})
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

// replay looks at one connection every 100 ms from 0 to end (seconds),
// as tcp_info would show it: requests sent at sends and answered at
// answers (seconds, one segment each; the peer's ACK of a request rides
// in the same 4 ms jiffy, the answer carries the ACK), ages in jiffies.
func replay(c *connTrace, t0 time.Time, end float64, sends, answers []float64) {
	const jiffy = 0.004
	tick := func(s float64) int64 { return int64(math.Floor(s / jiffy)) }
	for i := 0; float64(i)*0.1 <= end+1e-9; i++ {
		now := float64(i) * 0.1
		ti := sockdiag.TCPInfo{Size: 232}
		var lastSend, lastRecv float64 = -100, -100
		for _, s := range sends {
			if s <= now {
				ti.DataSegsOut++
				lastSend = s
			}
		}
		for _, a := range answers {
			if a <= now {
				ti.DataSegsIn++
				lastRecv = a
			}
		}
		age := func(s float64) uint32 { return uint32((tick(now) - tick(s)) * 4) }
		ti.LastDataSent, ti.LastDataRecv, ti.LastAckRecv = age(lastSend), age(lastRecv), age(max(lastSend, lastRecv))
		c.observe(t0.Add(time.Duration(now*float64(time.Second))), &ti)
		c.tick = i
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
		timed    bool // timed one by one
		lo, hi   time.Duration
		busyOver float64
	}{
		{"2 s requests begun before the trace", 2, 0.01, -0.5, 5, 20, true, 1990 * time.Millisecond, 2010 * time.Millisecond, 0.95},
		{"300 ms requests with pauses", 0.3, 0.25, -0.1, 5, 4, true, 296 * time.Millisecond, 304 * time.Millisecond, 0.5},
		// A saturated pool to a dependency that reads each request at
		// once: the next request leaves in the answer's jiffy and is
		// acknowledged in it, so no look after the first request's
		// decides; the segment calibration times them.
		{"400 ms requests sent in the previous answer's jiffy", 0.4, 0, -0.1, 5, 4, true, 396 * time.Millisecond, 404 * time.Millisecond, 0.95},
		// Request and answer in one jiffy, then a pause longer than
		// between two looks: the looks that decide nothing are at the
		// idle difference, and a "round trip" from one to the next
		// answer would be the pause.
		{"0.1 ms requests with long pauses", 0.0001, 0.2492, 0.013, 5, 4, false, 0, 10 * time.Millisecond, 0},
		{"20 ms requests, several between looks", 0.02, 0.005, 0, 5, 4, false, 15 * time.Millisecond, 25 * time.Millisecond, 0.7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var conns []*connTrace
			for range tc.conns {
				c := &connTrace{srv: api, dst: "backend:80"}
				var sends, answers []float64
				for s := tc.start; s < tc.end+tc.rt; s += tc.rt + tc.gap {
					sends, answers = append(sends, s), append(answers, s+tc.rt)
				}
				replay(c, t0, tc.end, sends, answers)
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
