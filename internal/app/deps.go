package app

import (
	"fmt"
	"sort"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// Dependency is one destination a server sends requests to (a database,
// a cache, a backend), as the server's own connections to it show it
// while the load ran: how many, how busy, how long each round trip.
type Dependency struct {
	Addr string `json:"addr"`
	// Owner is the process listening at Addr, when it listens on this
	// host: in the server's namespace ("redis-server (pid 812)") or in
	// another one ("redis-server (pid 812, netns cache)"). Observed says
	// it is diagnosed as a server of the run too. OtherHost says that no
	// namespace of this host has Addr and a listener for it: the
	// dependency runs on another host.
	Owner     string `json:"owner,omitempty"`
	Observed  bool   `json:"observed,omitempty"`
	OtherHost bool   `json:"other_host,omitempty"`
	// Conns is the pool: the connections that carried data while
	// traced; New those opened meanwhile, seen once a second (a
	// connection per request shows there, and is too short to measure).
	Conns int `json:"conns"`
	New   int `json:"new,omitempty"`
	// Seconds is how long the connections were traced, Samples how many
	// times each was looked at (every 100 ms).
	Seconds float64 `json:"seconds"`
	Samples int     `json:"samples"`
	// Per second, over all the connections: data segments and payload
	// bytes each way.
	SegsOutPerSec  float64 `json:"segs_out_per_sec"`
	SegsInPerSec   float64 `json:"segs_in_per_sec"`
	BytesOutPerSec float64 `json:"bytes_out_per_sec"`
	BytesInPerSec  float64 `json:"bytes_in_per_sec"`
	// Busy is the share of time a connection had a request outstanding
	// (sent, its answer not yet received), averaged over the pool.
	Busy float64 `json:"busy"`
	// RoundTripsPerSec is the requests sent (data segments out) per
	// second; RoundTrip the time each kept a connection busy:
	// Busy × Conns / RoundTripsPerSec, or, when RoundTripsTimed is not
	// 0, the mean of that many round trips timed one by one from the
	// request's send to its answer (requests longer than the interval
	// between looks, most of those sent).
	RoundTripsPerSec float64       `json:"round_trips_per_sec"`
	RoundTrip        time.Duration `json:"round_trip"`
	RoundTripsTimed  int           `json:"round_trips_timed,omitempty"`
	// RTT is the kernel's smoothed round-trip time to it, the highest
	// of its connections'. On a request/response connection it is not
	// the network's: the dependency's ACK rides on its answer, so each
	// sample holds the time to answer.
	RTT time.Duration `json:"rtt"`
	// MinRTT is the lowest RTT the kernel sampled on any of its
	// connections (the handshake's among them, within the last
	// tcp_min_rtt_wlen): the network's, which RoundTrip includes. 0 when
	// the kernel has none (before Linux 4.6).
	MinRTT time.Duration `json:"min_rtt,omitempty"`
	// Pipelined is the share of busy samples in which another request
	// went out before the answer to the previous one came: several
	// requests in flight on one connection, where RoundTrip and the pool
	// do not hold.
	Pipelined float64 `json:"pipelined,omitempty"`
	// Untimed says why the busy share, the round trips and the time per
	// round trip are not measured: UnixUntimed for a unix-socket
	// dependency ("unix:/run/php/php8.2-fpm.sock"), whose Conns are the
	// connections open for two samples or more (whether each carried
	// data is not known) and whose only timing is Unread.
	Untimed string `json:"untimed,omitempty"`
	// Unread is, for a unix-socket dependency, the share of samples in
	// which what a connection sent was still unread at the dependency's
	// end: a request outstanding, waiting for a worker or for the accept
	// (or, for a dependency that reads lazily, in service). A lower
	// bound on the busy share (a request read and being worked on is
	// not seen), not an estimate of it.
	Unread float64 `json:"unread,omitempty"`
}

// Multiplexed reports whether requests overlapped on the connections
// often enough that the estimates do not hold.
func (d *Dependency) Multiplexed() bool { return d.Pipelined >= 0.1 }

// MaxRoundTripsPerSec is what the pool can do at most: each connection
// busy all the time.
func (d *Dependency) MaxRoundTripsPerSec() float64 {
	if d.RoundTrip <= 0 {
		return 0
	}
	return float64(d.Conns) / d.RoundTrip.Seconds()
}

// connTrace is what one connection showed while traced.
type connTrace struct {
	srv   *Server
	dst   string
	id    sockdiag.SockID
	ino   uint64
	isNew bool
	at    time.Time // when a lookup last found it
	gone  bool      // a lookup did not find it: closed

	// tick is the trace's tick of the last sample, due the tick of the
	// next; quiet counts the samples in a row that saw nothing move.
	tick, due, quiet int

	// n counts the samples, decided those whose order of request and
	// answer tcp_info tells (observe), busy those of them with a request
	// outstanding.
	n, decided, busy, pipelined int
	// bySegs tallies samples by the data segments sent less those
	// received (resolve): the decided ones, busy or idle, and those
	// that decided nothing.
	bySegs                map[int32]*segTally
	first, last           sockdiag.TCPInfo
	firstAt, lastAt       time.Time
	sendAt, recvAt        time.Time // of the previous sample
	wasBusy, wasUndecided bool

	// reqAt is when the request outstanding at the last look was sent,
	// zero when none was or its start is not known (pair); paired sums
	// the round trips timed from request to answer, pairedN counts them.
	// reqUndecided says reqAt is of a look that decided nothing,
	// reqDiff its difference of data segments (pair).
	reqAt        time.Time
	reqUndecided bool
	reqDiff      int32
	paired       time.Duration
	pairedN      int

	// unix says it is a unix-socket connection (no tcp_info: only n and
	// unread count), unread how many samples found what it sent still
	// unread at the dependency's end (sampleUnix).
	unix   bool
	unread int
}

// sample adds the sample taken at now, the trace's tick, and says when
// the next is due: the next tick, or slow ticks later once the
// connection has been quiet for quietAfter samples.
//
// The samples a quiet connection skips are counted when it is still
// quiet at its next look: no data segment went either way, so each
// skipped tick saw what the last look saw. After a look that was idle,
// no request was out at any of them: decided idle samples. After a look
// that decided nothing (request, answer and ACK in one tick), they
// decide nothing either, at the same difference of segments, which the
// pool's calibration settles (resolve). Counting those as idle read a
// pool of 20 connections to php-fpm, each holding a 2 s request that
// php-fpm had acknowledged at once, 45–70 % busy and 1.1–1.4 s per round
// trip. When something moved meanwhile, the skipped ticks are not
// counted (which of them were busy is unknown; tcp_info's busy_time,
// which dependencies prefers when it is larger, still covers them).
func (c *connTrace) sample(now time.Time, t *sockdiag.TCPInfo, tick, slow int) {
	still := c.n > 0 && !c.wasBusy && t.HasDataSegs() &&
		t.DataSegsOut == c.last.DataSegsOut && t.DataSegsIn == c.last.DataSegsIn
	if skipped := tick - c.tick - 1; still && skipped > 0 {
		c.n += skipped
		n := c.tally(int32(t.DataSegsOut - t.DataSegsIn))
		if c.wasUndecided {
			n.undecided += skipped
		} else {
			c.decided += skipped
			n.idle += skipped
		}
	}
	c.observe(now, t)
	if still && !c.wasBusy {
		c.quiet++
	} else {
		c.quiet = 0
	}
	c.tick, c.due = tick, tick+1
	if c.quiet >= quietAfter {
		c.due = tick + slow
	}
}

// A pool's time per round trip is the mean of the round trips timed one
// by one (pair) when there are minPaired of them at least and they are
// pairedShare of the requests sent while traced or more: pairing times
// only the requests longer than the interval between looks, and the
// mean of a few of a mix would be theirs.
const (
	minPaired   = 3
	pairedShare = 0.8
)

// maxLost is the share of a pool's looks whose order of request and
// answer may stay unknown (after resolve) for its busy share and time per
// round trip to be given.
const maxLost = 0.75

// timed reports whether the connection carried data while it was
// looked at, twice or more: the ones whose busy share and round trips
// are measured.
func (c *connTrace) timed() bool {
	return c.n >= 2 && c.last.DataSegsOut != c.first.DataSegsOut
}

// segTally counts samples that saw one difference of data segments out
// and in; rt and rtN are the round trips timed from a request sent in a
// look that decided nothing at that difference (pair).
type segTally struct {
	busy, idle, undecided int
	rt                    time.Duration
	rtN                   int
}

// settles says what a pool's calibration at one difference decides for
// the looks there that decided nothing: busy when its decided looks were
// all busy, idle when all idle; ok is false when they were both, or
// none.
func (p segTally) settles() (busy, ok bool) {
	switch {
	case p.busy > 0 && p.idle == 0:
		return true, true
	case p.idle > 0 && p.busy == 0:
		return false, true
	}
	return false, false
}

// resolve is the connection's decided and busy samples once the
// undecided ones that the segment counts settle are added; cal is the
// decided samples of all the pool's connections by difference.
//
// On a connection that carries one request and one answer at a time,
// each a single segment (small queries, most answers over loopback's
// 64 KiB MSS), data segments out less data segments in is one value
// while a request is outstanding and one less when none is, whatever the
// jiffies say. A difference at which the decided samples were all busy
// (or all idle) decides the undecided samples at it; one with both, or
// none, leaves them undecided: answers of several segments, or a
// difference never seen decided. The calibration is the pool's: one
// connection of eight was never caught deciding in 3 s. A saturated
// pool to a dependency that reads each request at once (its kernel ACKs
// in the answer's tick) was 9 samples in 10 undecided, its busy share
// read 59–90 % for a true 100 %; the sub-jiffy round trips of a fast
// dependency fall at the idle difference, and stay idle.
func (c *connTrace) resolve(cal map[int32]segTally) (decided, busy int) {
	decided, busy = c.decided, c.busy
	for d, n := range c.bySegs {
		if b, ok := cal[d].settles(); ok && n.undecided > 0 {
			decided += n.undecided
			if b {
				busy += n.undecided
			}
		}
	}
	return decided, busy
}

// observe adds one sample of the connection taken at now.
//
// A request is outstanding when the connection last sent data more
// recently than it received any. tcp_info counts those times in jiffies
// (4 ms at HZ=250): a request sent right after the previous answer (a
// saturated pool) shows the same time as that answer. It is outstanding
// then while its bytes are not yet acknowledged, or when an ACK came
// after that answer: the peer's kernel acknowledged the request alone
// (its delayed-ACK timer, 40 ms) because the application behind it had
// not answered yet — a dependency whose own workers are all busy leaves
// requests unread that long.
//
// When the request, the answer and the last ACK all fall in one tick,
// the order is lost: an answer carrying the ACK of a request made in the
// same tick (a fast dependency, the request over), or a request sent
// right after an answer and acknowledged at once by the peer's kernel (a
// saturated pool, the request outstanding). On a veth both are common
// (measured with ss -ti: a third of a saturated pool's samples). Such a
// sample decides nothing: the busy share is over the others.
func (c *connTrace) observe(now time.Time, t *sockdiag.TCPInfo) {
	sendAt := now.Add(-time.Duration(t.LastDataSent) * time.Millisecond)
	recvAt := now.Add(-time.Duration(t.LastDataRecv) * time.Millisecond)
	busy := t.LastDataSent < t.LastDataRecv || (t.LastDataSent == t.LastDataRecv && (t.Unacked > 0 || t.LastAckRecv < t.LastDataRecv))
	undecided := t.LastDataSent == t.LastDataRecv && t.Unacked == 0 && t.LastAckRecv == t.LastDataRecv
	if undecided && t.HasDataSegs() && t.DataSegsIn == 0 && t.DataSegsOut > 0 {
		// Nothing ever came back and a request went out: it is
		// outstanding. A new connection's first request leaves in the
		// tick its handshake ended, which tcp_info gives as the last
		// receive; a pool opened under load is all such looks.
		busy, undecided = true, false
	}
	c.pair(t, sendAt, recvAt, busy, undecided)
	if c.n == 0 {
		c.first, c.firstAt = *t, now
	} else if c.wasBusy && busy && t.DataSegsOut > c.last.DataSegsOut && t.DataSegsIn == c.last.DataSegsIn {
		// Another request went out and no answer came in.
		c.pipelined++
	}
	c.n++
	if !undecided {
		c.decided++
		if busy {
			c.busy++
		}
	}
	if t.HasDataSegs() {
		n := c.tally(int32(t.DataSegsOut - t.DataSegsIn)) // wraps with the counters
		switch {
		case undecided:
			n.undecided++
		case busy:
			n.busy++
		default:
			n.idle++
		}
	}
	c.last, c.lastAt, c.sendAt, c.recvAt, c.wasBusy, c.wasUndecided = *t, now, sendAt, recvAt, busy, undecided
}

// pair times round trips one by one, from the request's send to its
// answer, where no more than one request went out between two looks:
// tcp_info dates the last data sent and received to the jiffy whenever
// it is looked at, so a request longer than the interval between looks
// is timed whole, the one already outstanding at the first look among
// them. Counting requests sent during the trace against the busy time
// misses that one and its time: 20 connections each holding a 2 s
// request when the trace began read 2.49 s per round trip over 5 s.
// Anything it cannot date (two requests between looks, several
// outstanding, an order lost in one jiffy) is left out, and
// dependencies keeps the busy-time estimate unless most round trips
// were timed.
func (c *connTrace) pair(t *sockdiag.TCPInfo, sendAt, recvAt time.Time, busy, undecided bool) {
	prev, prevUndecided, prevDiff := c.reqAt, c.reqUndecided, c.reqDiff
	c.reqAt, c.reqUndecided = time.Time{}, false
	if !t.HasDataSegs() {
		return
	}
	diff := int32(t.DataSegsOut - t.DataSegsIn)
	if c.n > 0 && !prev.IsZero() {
		out := t.DataSegsOut - c.last.DataSegsOut
		in := t.DataSegsIn - c.last.DataSegsIn
		if out == 0 && in == 0 && (busy || undecided) {
			// Nothing moved: the same request, outstanding for sure
			// once a look decides it busy.
			c.reqAt, c.reqUndecided, c.reqDiff = prev, prevUndecided && undecided, prevDiff
			return
		}
		// The answer to the request outstanding at the last look came,
		// and the last data received is that answer: nothing sent
		// since, or one request sent after it and still outstanding
		// (when the order is lost in one jiffy, the answer still came
		// in that jiffy, which dates it).
		if in > 0 && out <= 1 && recvAt.After(prev) &&
			(undecided || (out == 0 && !busy) || (out == 1 && busy && !sendAt.Before(recvAt))) {
			if prevUndecided {
				n := c.tally(prevDiff)
				n.rt += recvAt.Sub(prev)
				n.rtN++
			} else {
				c.paired += recvAt.Sub(prev)
				c.pairedN++
			}
		}
	}
	switch {
	case busy && !undecided:
		// The request outstanding now is the last data sent, whenever
		// it went out: the first look's in-flight request, or one sent
		// in the jiffy of the previous answer and found outstanding
		// only now.
		c.reqAt = sendAt
	case undecided && t.DataSegsOut > 0 && (c.n == 0 || t.DataSegsOut != c.last.DataSegsOut):
		// Request, answer and ACK in one jiffy: a request sent right
		// after the previous answer and outstanding (a saturated pool
		// to a dependency that reads at once), or one answered in that
		// jiffy. Its round trip, if it has one, is kept by the
		// difference of segments, and counts where the pool's
		// calibration says that difference is busy (dependencies).
		// Nothing sent since a look that tracked no request is no new
		// request.
		c.reqAt, c.reqUndecided, c.reqDiff = sendAt, true, diff
	}
}

// tally is the count of samples at difference d (resolve).
func (c *connTrace) tally(d int32) *segTally {
	if c.bySegs == nil {
		c.bySegs = map[int32]*segTally{}
	}
	n := c.bySegs[d]
	if n == nil {
		n = &segTally{}
		c.bySegs[d] = n
	}
	return n
}

// dependencies sums the traced connections per server and destination.
// owner names a destination's listener, if it is one netdoctor sees.
func dependencies(conns []*connTrace, owner func(d *Dependency)) map[*Server][]Dependency {
	type key struct {
		s   *Server
		dst string
	}
	type acc struct {
		d                             Dependency
		busySec, secs, rtSum, rtTimed float64
		busyN, pipe                   int
		paired                        time.Duration
		pairedN                       int
		decided, samples              int
		unread, looks                 int
		rtt, minRTT                   time.Duration
		from, to                      time.Time
	}
	// The decided samples of a pool's connections, by difference of
	// segments: one protocol, one handshake, so one calibration for
	// connections that were never caught deciding (resolve). It holds
	// only where a quarter of the pool's connections at least were
	// caught deciding at that difference: one connection of twenty is
	// too thin to speak for the others (a pool to php-fpm, which
	// acknowledges each request at once, was settled 0 % or 100 % busy by
	// whether a single connection's request had crossed a jiffy).
	type calib struct {
		segTally
		conns int
	}
	pooled := map[key]map[int32]*calib{}
	timed := map[key]int{}
	for _, c := range conns {
		if c.unix || !c.timed() {
			continue
		}
		k := key{c.srv, c.dst}
		timed[k]++
		for d, n := range c.bySegs {
			if n.busy+n.idle == 0 {
				continue
			}
			m := pooled[k]
			if m == nil {
				m = map[int32]*calib{}
				pooled[k] = m
			}
			p := m[d]
			if p == nil {
				p = &calib{}
				m[d] = p
			}
			p.busy, p.idle, p.conns = p.busy+n.busy, p.idle+n.idle, p.conns+1
		}
	}
	cal := map[key]map[int32]segTally{}
	for k, m := range pooled {
		cal[k] = map[int32]segTally{}
		for d, p := range m {
			if 4*p.conns >= timed[k] {
				cal[k][d] = p.segTally
			}
		}
	}
	by := map[key]*acc{}
	for _, c := range conns {
		if c.n == 0 {
			continue // gone before its first sample
		}
		k := key{c.srv, c.dst}
		a := by[k]
		if a == nil {
			a = &acc{d: Dependency{Addr: c.dst}, from: c.firstAt, to: c.lastAt}
			by[k] = a
		}
		if c.isNew {
			a.d.New++
		}
		if c.unix {
			a.d.Untimed = UnixUntimed
			if c.n < 2 {
				continue // opened and closed between two looks
			}
			a.d.Conns++
			a.d.Samples = max(a.d.Samples, c.n)
			a.unread += c.unread
			a.looks += c.n
			a.from, a.to = minTime(a.from, c.firstAt), maxTime(a.to, c.lastAt)
			continue
		}
		if !c.timed() {
			// Too short-lived to measure (a connection per request),
			// or idle: counted among the new ones only.
			continue
		}
		secs := c.lastAt.Sub(c.firstAt).Seconds()
		share, known := 0.0, false
		decided, busy := c.resolve(cal[k])
		if decided > 0 {
			share, known = float64(busy)/float64(decided), true
		}
		a.decided += decided
		a.samples += c.n
		// busy_time counts the time the connection had unacknowledged
		// data: at least the outstanding time when the peer ACKs with
		// its answer; it catches requests between two samples.
		if c.last.HasBusyTime() && secs > 0 {
			if bt := min(1, float64(c.last.BusyTime-c.first.BusyTime)/1e6/secs); bt > share {
				share, known = bt, true
			}
		}
		a.d.Conns++
		a.rtSum += float64(c.last.DataSegsOut - c.first.DataSegsOut)
		if known {
			// A connection whose every look decided nothing says
			// nothing of the busy share: not an idle one.
			a.busySec += share * secs
			a.secs += secs
			a.rtTimed += float64(c.last.DataSegsOut - c.first.DataSegsOut)
			a.paired += c.paired
			a.pairedN += c.pairedN
			for d, n := range c.bySegs {
				if busy, _ := cal[k][d].settles(); n.rtN > 0 && busy {
					a.paired += n.rt
					a.pairedN += n.rtN
				}
			}
		}
		a.d.Samples = max(a.d.Samples, c.n)
		a.d.SegsOutPerSec += float64(c.last.DataSegsOut - c.first.DataSegsOut)
		a.d.SegsInPerSec += float64(c.last.DataSegsIn - c.first.DataSegsIn)
		a.d.BytesOutPerSec += float64(c.last.BytesAcked - c.first.BytesAcked)
		a.d.BytesInPerSec += float64(c.last.BytesReceived - c.first.BytesReceived)
		a.busyN += c.busy
		a.pipe += c.pipelined
		a.rtt = max(a.rtt, c.last.SRTT())
		if m, ok := c.last.MinRTTOK(); ok && (a.minRTT == 0 || m < a.minRTT) {
			a.minRTT = m
		}
		a.from, a.to = minTime(a.from, c.firstAt), maxTime(a.to, c.lastAt)
	}
	out := map[*Server][]Dependency{}
	for k, a := range by {
		d := a.d
		d.Seconds = a.to.Sub(a.from).Seconds()
		if d.Untimed != "" {
			// No tcp_info: the destination, its connections and how
			// many requests sat unread there; nothing timed.
			if a.looks > 0 {
				d.Unread = float64(a.unread) / float64(a.looks)
			}
			if d.Conns+d.New > 0 {
				if owner != nil {
					owner(&d)
				}
				out[k.s] = append(out[k.s], d)
			}
			continue
		}
		if d.Conns == 0 {
			// Only connections too short to measure: the destination
			// and how many were opened still belong in the table.
			if d.New > 0 && owner != nil {
				owner(&d)
			}
			if d.New > 0 {
				out[k.s] = append(out[k.s], d)
			}
			continue
		}
		for _, v := range []*float64{&d.SegsOutPerSec, &d.SegsInPerSec, &d.BytesOutPerSec, &d.BytesInPerSec} {
			*v /= d.Seconds
		}
		d.RoundTripsPerSec = a.rtSum / d.Seconds
		d.RTT, d.MinRTT = a.rtt, a.minRTT
		if lost := 1 - float64(a.decided)/float64(a.samples); a.secs <= 0 || lost > maxLost {
			// The order of request and answer was lost in most looks:
			// no busy share, no time per round trip, rather than one
			// made of the few looks that kept it.
			d.Untimed = fmt.Sprintf("request, answer and ACK in one jiffy in %.0f%% of looks: their order is lost", 100*lost)
			if owner != nil {
				owner(&d)
			}
			out[k.s] = append(out[k.s], d)
			continue
		}
		d.Busy = a.busySec / a.secs
		if a.rtTimed > 0 {
			d.RoundTrip = time.Duration(a.busySec / a.rtTimed * float64(time.Second))
		}
		if a.pairedN >= minPaired && float64(a.pairedN) >= pairedShare*a.rtTimed {
			// Most round trips were timed one by one (pair): their mean
			// holds where the ratio's edges do not (requests as long as
			// the trace, all begun at once).
			d.RoundTrip = a.paired / time.Duration(a.pairedN)
			d.RoundTripsTimed = a.pairedN
		}
		if a.busyN > 0 {
			d.Pipelined = float64(a.pipe) / float64(a.busyN)
		}
		if owner != nil {
			owner(&d)
		}
		out[k.s] = append(out[k.s], d)
	}
	for _, ds := range out {
		sort.SliceStable(ds, func(i, j int) bool {
			if bi, bj := ds[i].Busy*float64(ds[i].Conns), ds[j].Busy*float64(ds[j].Conns); bi != bj {
				return bi > bj
			}
			// Untimed rows (unix sockets) by their pools, then by name,
			// for a stable table.
			if ds[i].Conns != ds[j].Conns {
				return ds[i].Conns > ds[j].Conns
			}
			return ds[i].Addr < ds[j].Addr
		})
	}
	return out
}

func minTime(a, b time.Time) time.Time {
	if a.IsZero() || b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
