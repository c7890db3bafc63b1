package app

import (
	"slices"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// connTrace is what one connection showed while traced.
//
// Each look (every interval) asks tcp_info where the connection is in
// its exchange of requests and answers. A look at which the last data
// went out after the last data came in, or at which what went out is not
// yet acknowledged, has a request outstanding with nothing of its answer
// received: busy, decided there. Any other look has received data since
// its last send, and cannot tell by itself whether that answer is whole
// (the connection idle) or only begun: a server that flushes its headers
// first and its body later, an answer in several writes, one whose last
// segment Nagle's algorithm holds until the client's delayed ACK. Such a
// look waits for the connection's next movement: more of the answer
// first (it was busy), or a request first (the answer was whole, it was
// idle). Probes soon after it (not counted as looks) catch that movement
// before the next request blurs it. When the answer's rest, the next
// request and that one's first bytes all come between two observations
// (a saturated pool: the next request leaves in the microseconds after
// the answer), the order is lost; such looks are settled at the end by
// the connection's lattice (see lattice): on a connection whose answers
// are all one size, its bytes received less that size times its
// requests sent say where each look was in its answer.
type connTrace struct {
	srv   *Server
	dst   string
	id    sockdiag.SockID
	ino   uint64
	isNew bool
	at    time.Time // when a lookup last found it
	gone  bool      // a lookup did not find it: closed

	// tick is the trace's tick of the last look, due the tick of the
	// next; quiet counts the looks in a row that saw nothing move.
	tick, due, quiet int
	// probeAt is when the next probe is due (zero: none); probes counts
	// those since the last look.
	probeAt time.Time
	probes  int

	// n counts the looks, decided those whose state is known, busy those
	// of them with a request outstanding; pipelined the observations at
	// which another request had gone out while one was outstanding.
	n, decided, busy, pipelined int
	first, last                 sockdiag.TCPInfo
	firstAt, lastAt             time.Time
	seen                        bool
	// waiting says the last observation decided nothing by itself (data
	// received since the last send); chain counts the looks since then,
	// all alike, which the next movement decides: looks[chainAt:].
	waiting bool
	chain   int
	chainAt int
	// looks is each look's place in the byte stream, for the lattice
	// (up to maxLooks); the lattice of those is then frozen (la, lz0,
	// lok) and places the looks beyond them as they settle; lost counts
	// the looks left undecided that way. chainIn and chainOut are the
	// chain's place.
	looks       []connLook
	lost        int
	frozen, lok bool
	la, lz0     int64
	chainIn     uint64
	chainOut    uint32

	// paired sums the round trips timed one by one, from a request's send
	// to its answer's end, pairedN counts them; maybe are round trips
	// that hold where the lattice says the answer had not begun (timing).
	paired  time.Duration
	pairedN int
	maybe   []maybeRT

	// held counts the looks at which this end held data it had written
	// (Nagle's algorithm or a cork: see heldBack); peer says the
	// dependency's end is a socket of this namespace, looked up with each
	// look: peerN looks found it, peerHeld held its answers back, peerIno
	// is its inode. noDelay is TCP_NODELAY on this end, peerNoDelay on
	// the dependency's (read at the end, where it held answers back).
	held                    int
	peer                    sockdiag.SockID
	peerN, peerHeld         int
	peerIno                 uint32
	noDelay, peerNoDelay    sockOpt
	rng                     uint64   // peerDue's
	ato                     uint32   // µs, the last look's delayed-ACK timeout
	pauses                  []uint16 // resolve's
	pureAcksOut, pureAcksIn uint32

	// unix says it is a unix-socket connection (no tcp_info: only n and
	// unread count), unread how many samples found what it sent still
	// unread at the dependency's end (sampleUnix).
	unix   bool
	unread int
}

// sockOpt is a boolean socket option as read on a copy of the socket.
type sockOpt int8

const (
	optUnknown sockOpt = iota // not read
	optOn
	optOff
)

// connLook is one look's place in the connection's exchange: the bytes
// received and data segments sent until then, how many looks it stands
// for (a quiet connection's skipped ticks), what it was, and, in an
// answer's pause, how long ago the last part came.
type connLook struct {
	in    uint64
	out   uint32
	w     int32
	state lookState
	age   uint16 // ms since the last data received
}

type lookState uint8

const (
	// lookOpen: received data since the last send, not decided.
	lookOpen lookState = iota
	// lookOut: a request out, nothing of its answer received (busy).
	lookOut
	// lookPart: part of an answer received, more came first (busy).
	lookPart
	// lookIdle: the answer whole, a request went out first (idle).
	lookIdle
)

func (s lookState) busy() bool { return s == lookOut || s == lookPart }

// maybeRT is a round trip timed from a request's send to the last data
// received before the next request, which holds when nothing of the next
// request's answer had come yet: where the lattice puts (in, out) at the
// start of an answer.
type maybeRT struct {
	in  uint64
	out uint32
	rt  time.Duration
}

// maxLooks bounds the looks a connection keeps for its lattice: 100 s
// of looks every 100 ms, 24 KiB; past them the lattice they make places
// the rest (256 connections keep 6 MiB at most).
const maxLooks = 1024

// maxProbes is how many probes follow a look that decided nothing,
// probeDelay the first one's delay, doubling for each: at 5, 15, 35 and
// 75 ms, before the next look at 100.
const (
	maxProbes  = 4
	probeDelay = 5 * time.Millisecond
)

// outstanding reports whether tcp_info shows a request out with nothing
// of its answer received: the connection sent data after the last data
// it received; or what it sent is not acknowledged (an answer would
// carry the ACK); or an ACK came after the last data (the peer's kernel
// acknowledged the request alone: its application had not answered);
// or it sent and never received (a new connection's first request, in
// the jiffy its handshake ended). tcp_info gives ages in jiffies (4 ms
// at HZ=250): a request sent in the tick of the previous answer and
// acknowledged at once shows none of these.
//
// The ACK after the last data counts only within ackedAlone of the last
// send: a keepalive probe's ACK also comes after the last data, and
// with nothing sent since (the kernel takes any ACK it accepts as the
// last one received), on a pool's connection idle past its keepalive
// time (Go's: 15 s) it read a whole idle connection as busy, which kept
// its lattice from forming.
func outstanding(t *sockdiag.TCPInfo) bool {
	if t.LastDataSent < t.LastDataRecv || t.Unacked > 0 {
		return true
	}
	if t.LastAckRecv < t.LastDataRecv && t.LastAckRecv <= t.LastDataSent && t.LastDataSent-t.LastAckRecv <= ackedAlone {
		return true
	}
	return t.HasDataSegs() && t.DataSegsIn == 0 && t.DataSegsOut > 0
}

// ackedAlone is the longest, in ms, after a request's send that an ACK
// of it alone comes: the peer's delayed ACK (200 ms at most in Linux,
// 500 ms by RFC 1122) and a round trip. A keepalive probe goes out after
// a second of silence at the least (TCP_KEEPIDLE; Go's default is 15 s,
// Linux's 2 hours).
const ackedAlone = 1000

// heldBack reports whether this end holds data it has written while one
// segment is unacknowledged and the congestion window has room: Nagle's
// algorithm waiting for an ACK (the peer may delay it 40 ms), or a cork.
// The send window is not checked (tcpi_snd_wnd is recent): request and
// answer protocols do not fill it.
func heldBack(t *sockdiag.TCPInfo) bool {
	return t.HasNotsent() && t.NotsentBytes > 0 && t.Unacked > 0 && t.Unacked < t.SndCwnd
}

// sample adds the look taken at now, the trace's tick, and says when the
// next is due: the next tick, or slow ticks later once the connection
// has been quiet for quietAfter looks.
//
// The looks a quiet connection skips are counted when it is still quiet
// at its next look: no data went either way, so each skipped tick saw
// what the last look saw, and waits with it for the next movement (which
// decides them all: a request first, they were idle). Counting them
// idle at once read a pool of 20 connections to php-fpm, each holding a
// 2 s request that php-fpm had acknowledged at once, 45–70 % busy. When
// something moved meanwhile, the skipped ticks are not counted (which of
// them were busy is unknown; tcp_info's busy_time, which dependencies
// prefers when it is larger, still covers them).
func (c *connTrace) sample(now time.Time, t *sockdiag.TCPInfo, tick, slow int) {
	still := c.seen && c.waiting && t.HasDataSegs() &&
		t.DataSegsOut == c.last.DataSegsOut && t.BytesReceived == c.last.BytesReceived
	if skipped := tick - c.tick - 1; still && skipped > 0 {
		c.count(c.last, lookOpen, skipped, 0)
	}
	moved := !c.seen || t.DataSegsOut != c.last.DataSegsOut || t.BytesReceived != c.last.BytesReceived
	c.observe(now, t, true)
	if !moved && c.waiting {
		c.quiet++
	} else {
		c.quiet = 0
	}
	c.tick, c.due = tick, tick+1
	if c.quiet >= quietAfter {
		c.due = tick + slow
	}
	c.probes, c.probeAt = 0, time.Time{}
	if c.waiting && c.quiet == 0 {
		c.probeAt = now.Add(probeDelay)
	}
}

// probe adds an observation taken at now between two looks: it counts
// for nothing itself, but decides the looks before it when something
// moved. The next probe is due twice as long after, up to maxProbes.
func (c *connTrace) probe(now time.Time, t *sockdiag.TCPInfo) {
	c.observe(now, t, false)
	c.probes++
	c.probeAt = time.Time{}
	if c.waiting && c.probes < maxProbes {
		c.probeAt = now.Add(probeDelay << c.probes)
	}
}

// observe adds one observation of the connection taken at now; counted
// says it is a look (a probe is not).
func (c *connTrace) observe(now time.Time, t *sockdiag.TCPInfo, counted bool) {
	if !t.HasDataSegs() {
		// Before Linux 4.6: nothing to place a look with but the ages.
		c.observeAges(now, t, counted)
		return
	}
	out := outstanding(t)
	sendAt := now.Add(-time.Duration(t.LastDataSent) * time.Millisecond)
	recvAt := now.Add(-time.Duration(t.LastDataRecv) * time.Millisecond)
	if c.seen {
		dOut := t.DataSegsOut - c.last.DataSegsOut
		dIn := t.BytesReceived - c.last.BytesReceived
		if c.waiting {
			switch {
			case dOut == 0 && dIn == 0:
				if out {
					// An ACK came alone: the request, sent in the tick
					// of the last answer, was out all along.
					c.settle(lookOut)
				}
			case dOut == 0:
				c.settle(lookPart) // more of the answer first
			case dIn == 0:
				c.settle(lookIdle) // a request first: the answer was whole
			case out && dOut == 1:
				// Data came, then the one request now outstanding.
				c.settle(lookPart)
			default:
				c.settle(lookOpen) // the order is lost: the lattice's
			}
		} else if dOut > 0 && dIn == 0 && c.last.NotsentBytes == 0 && c.last.DataSegsOut > 0 {
			// Another request went out while one was outstanding and
			// none of its answer came: pipelined or multiplexed (a
			// request's own rest, held by Nagle, is not another).
			c.pipelined++
		}
		c.timing(t, now, sendAt, recvAt, out, dOut, dIn)
		c.pureAcksOut += (t.SegsOut - c.last.SegsOut) - dOut
		c.pureAcksIn += (t.SegsIn - c.last.SegsIn) - (t.DataSegsIn - c.last.DataSegsIn)
	} else {
		c.first, c.firstAt = *t, now
	}
	if counted {
		st, age := lookOpen, uint16(0)
		if out {
			st = lookOut
		} else {
			age = uint16(min(t.LastDataRecv, 1<<16-1))
		}
		c.count(*t, st, 1, age)
		if heldBack(t) {
			c.held++
		}
		c.ato = t.Ato
	}
	c.waiting = !out
	c.seen, c.last, c.lastAt = true, *t, now
}

// peerDue says whether this look also looks up the dependency's end:
// one look in peerEvery, drawn at random (xorshift on the connection's
// own state) so that the looks do not beat with the exchange's period.
func (c *connTrace) peerDue() bool {
	if c.rng == 0 {
		c.rng = c.ino | 1
	}
	c.rng ^= c.rng << 13
	c.rng ^= c.rng >> 7
	c.rng ^= c.rng << 17
	return c.rng%peerEvery == 0
}

// peerLook adds a look at the dependency's end of the connection: m and
// t are its, as sock_diag found it by the reversed addresses.
func (c *connTrace) peerLook(m *sockdiag.InetDiagMsg, t *sockdiag.TCPInfo) {
	c.peerN++
	if heldBack(t) {
		c.peerHeld++
	}
	c.peerIno = m.Inode
}

// count adds w looks at t's place in the exchange, in state st: a look
// that decides nothing joins the chain waiting for the next movement.
func (c *connTrace) count(t sockdiag.TCPInfo, st lookState, w int, age uint16) {
	c.n += w
	if st.busy() {
		c.decided += w
		c.busy += w
	} else {
		if c.chain == 0 {
			c.chainAt, c.chainIn, c.chainOut = len(c.looks), t.BytesReceived, t.DataSegsOut
		}
		c.chain += w
	}
	switch {
	case len(c.looks) < maxLooks:
		c.looks = append(c.looks, connLook{in: t.BytesReceived, out: t.DataSegsOut, w: int32(w), state: st, age: age})
	case !c.frozen:
		c.la, c.lz0, c.lok = c.lattice()
		c.frozen = true
	}
}

// settle decides the looks waiting for a movement: st for each of them;
// lookOpen leaves those kept to the lattice, and the others (beyond
// maxLooks) undecided.
func (c *connTrace) settle(st lookState) {
	if c.chain == 0 {
		return
	}
	kept := 0
	for i := c.chainAt; i < len(c.looks); i++ {
		c.looks[i].state = st
		kept += int(c.looks[i].w)
	}
	switch {
	case st == lookOpen && c.frozen && c.lok:
		// Looks past maxLooks: the frozen lattice places them.
		if b, ok := place(c.chainIn, c.chainOut, c.la, c.lz0); ok {
			c.decided += c.chain - kept
			if b {
				c.busy += c.chain - kept
			}
		} else {
			c.lost += c.chain - kept
		}
	case st == lookOpen:
		c.lost += c.chain - kept
	default:
		c.decided += c.chain
		if st.busy() {
			c.busy += c.chain
		}
	}
	c.chain, c.chainAt = 0, len(c.looks)
}

// observeAges places a look on a kernel without data segment counters
// (before 4.6): only a request outstanding decides; the rest stay open.
func (c *connTrace) observeAges(now time.Time, t *sockdiag.TCPInfo, counted bool) {
	if !c.seen {
		c.first, c.firstAt = *t, now
	}
	if counted {
		c.n++
		if outstanding(t) {
			c.decided++
			c.busy++
		}
	}
	c.seen, c.last, c.lastAt = true, *t, now
}

// timing times round trips one by one, where one request went out
// between two observations: the previous request's answer ended with the
// last data received before it. That end is known when nothing came
// between the two observations (the answer was whole at the first),
// when everything that came did so before the request (it is still
// outstanding, nothing of its answer received), or, when the request and
// the last data received share a jiffy, where the lattice later puts the
// observation at the start of the new request's answer (maybe). tcp_info
// dates sends and receives to the jiffy whenever it is asked, so a
// request longer than the interval between looks is timed whole, the one
// already outstanding at the first look among them: counting requests
// sent during the trace against the busy time misses that one and its
// time (20 connections each holding a 2 s request when the trace began
// read 2.49 s per round trip over 5 s).
func (c *connTrace) timing(t *sockdiag.TCPInfo, now, sendAt, recvAt time.Time, out bool, dOut uint32, dIn uint64) {
	if dOut != 1 || c.last.DataSegsOut == 0 {
		return
	}
	prevSend := c.lastAt.Add(-time.Duration(c.last.LastDataSent) * time.Millisecond)
	prevRecv := c.lastAt.Add(-time.Duration(c.last.LastDataRecv) * time.Millisecond)
	switch {
	case dIn == 0 && c.waiting:
		if !prevRecv.Before(prevSend) {
			c.paired += prevRecv.Sub(prevSend)
			c.pairedN++
		}
	case dIn > 0 && out:
		if recvAt.After(prevSend) {
			c.paired += recvAt.Sub(prevSend)
			c.pairedN++
		}
	case dIn > 0 && t.LastDataSent == t.LastDataRecv && recvAt.After(prevSend) && len(c.maybe) < maxLooks:
		c.maybe = append(c.maybe, maybeRT{in: t.BytesReceived, out: t.DataSegsOut, rt: recvAt.Sub(prevSend)})
	}
}

// timed reports whether the connection carried data while it was
// looked at, twice or more: the ones whose busy share and round trips
// are measured.
func (c *connTrace) timed() bool {
	return c.n >= 2 && c.last.DataSegsOut != c.first.DataSegsOut
}

// A pool's time per round trip is the mean of the round trips timed one
// by one (timing) when there are minPaired of them at least and they are
// pairedShare of the requests sent while traced or more: one by one only
// those whose ends tcp_info dates are timed, and the mean of a few of a
// mix would be theirs.
const (
	minPaired   = 3
	pairedShare = 0.8
)

// maxLost is the share of a pool's looks that may stay undecided (after
// the lattice) for its busy share and time per round trip to be given.
const maxLost = 0.75

// minLatticeRequests is the least requests over a connection's looks for
// its lattice: over fewer, several sizes fit.
const minLatticeRequests = 8

// lattice finds the connection's exchange when its answers are all of
// one size a (in bytes) and its requests take as many data segments
// each: then bytes received less a times data segments sent, z, is one
// value z0 at every moment the last answer is whole, z0 − a while a
// request is out with nothing of its answer, and in between in an
// answer. Looks that decided (a request out: z0 − a; a request first:
// z0) anchor z0; a connection whose counters start with its first
// request (no greeting) has z0 = 0. ok is false when no size fits, or
// the anchors disagree: answers of several sizes, where only what
// tcp_info decided holds.
//
// The size comes from the bytes and requests between the first and last
// look, off by at most one answer at each end, so the sizes within that
// are tried. With the right one, the looks at the same point of their
// answers (idle, waiting for it, at its pause) share one z; each byte off
// drifts z by one byte per request, spreading them. The size whose
// commonest value holds the most looks wins (then the one whose three
// commonest hold most), and that value must hold a third of them: answers
// whose sizes vary by a few bytes (a number's digits) drift too, and
// are no lattice, where an idle look a byte off would read busy.
func (c *connTrace) lattice() (a, z0 int64, ok bool) {
	if len(c.looks) < 2 {
		return 0, 0, false
	}
	f, l := c.looks[0], c.looks[len(c.looks)-1]
	dn := int64(l.out) - int64(f.out)
	if dn < minLatticeRequests || l.in <= f.in {
		return 0, 0, false
	}
	total := 0
	for _, k := range c.looks {
		total += int(k.w)
	}
	a0 := float64(l.in-f.in) / float64(dn)
	lo, hi := max(1, int64(a0*float64(dn)/float64(dn+1))), int64(a0*float64(dn)/float64(dn-1))+1
	if hi-lo > 1<<12 {
		return 0, 0, false // too many sizes fit: too few requests for so large answers
	}
	zs := make([]int64, len(c.looks))
	count := map[int64]int{}
	best, bestScore, bestRange := int64(0), [2]int{}, int64(0)
	for cand := lo; cand <= hi; cand++ {
		clear(count)
		zmin, zmax := int64(1)<<62, -int64(1)<<62
		for i, k := range c.looks {
			z := int64(k.in) - cand*int64(k.out)
			zs[i] = z
			zmin, zmax = min(zmin, z), max(zmax, z)
			count[z] += int(k.w)
		}
		if zmax-zmin > cand {
			continue
		}
		if _, ok := anchor(c.looks, zs, cand); !ok {
			continue
		}
		var top [3]int
		for _, n := range count {
			switch {
			case n > top[0]:
				top = [3]int{n, top[0], top[1]}
			case n > top[1]:
				top[1], top[2] = n, top[1]
			case n > top[2]:
				top[2] = n
			}
		}
		score := [2]int{top[0], top[0] + top[1] + top[2]}
		if score[0] > bestScore[0] || score[0] == bestScore[0] && (score[1] > bestScore[1] || score[1] == bestScore[1] && zmax-zmin < bestRange) {
			best, bestScore, bestRange = cand, score, zmax-zmin
		}
	}
	if best == 0 || 3*bestScore[0] < total {
		return 0, 0, false
	}
	for i, k := range c.looks {
		zs[i] = int64(k.in) - best*int64(k.out)
	}
	z0, ok = anchor(c.looks, zs, best)
	return best, z0, ok
}

// anchor is z0 for answer size a, the looks' zs being theirs: where the
// decided looks put it, all agreeing (a look waiting for its answer at
// z0 − a, one whose answer was whole at z0, one in an answer below z0);
// 0 when none anchors it and every z is within [−a, 0].
func anchor(looks []connLook, zs []int64, a int64) (z0 int64, ok bool) {
	found := false
	zmin, zmax := int64(1)<<62, -int64(1)<<62
	for i, k := range looks {
		z := zs[i]
		zmin, zmax = min(zmin, z), max(zmax, z)
		var at int64
		switch k.state {
		case lookOut:
			at = z + a
		case lookIdle:
			at = z
		default:
			continue
		}
		if found && at != z0 {
			return 0, false
		}
		z0, found = at, true
	}
	if !found {
		if zmin < -a || zmax > 0 {
			return 0, false
		}
		z0 = 0
	}
	for i, k := range looks {
		if k.state == lookPart && (zs[i] >= z0 || zs[i] < z0-a) {
			return 0, false
		}
	}
	return z0, true
}

// place is where the lattice puts a look: in an answer (or waiting for
// it) or idle; ok is false outside the lattice.
func place(in uint64, out uint32, a, z0 int64) (busy, ok bool) {
	z := int64(in) - a*int64(out)
	switch {
	case z == z0:
		return false, true
	case z >= z0-a && z < z0:
		return true, true
	}
	return false, false
}

// resolve is the connection's decided and busy looks once its lattice,
// if it has one, has placed those the movements left open, and its
// round trips timed one by one with the maybes the lattice confirms. It
// also keeps, for pause, the ages of the looks caught in an answer's
// pause: part of it received (decided so by what came next, or placed
// so by the lattice).
func (c *connTrace) resolve() (decided, busy int, paired time.Duration, pairedN int) {
	decided, busy, paired, pairedN = c.decided, c.busy, c.paired, c.pairedN
	c.pauses = c.pauses[:0]
	a, z0, ok := c.lattice()
	for _, l := range c.looks {
		switch {
		case l.state == lookPart && (!ok || int64(l.in)-a*int64(l.out) > z0-a):
			c.pauses = append(c.pauses, l.age)
		case l.state != lookOpen || !ok:
		default:
			b, in := place(l.in, l.out, a, z0)
			if !in {
				continue
			}
			decided += int(l.w)
			if b {
				busy += int(l.w)
				if int64(l.in)-a*int64(l.out) > z0-a {
					c.pauses = append(c.pauses, l.age)
				}
			}
		}
	}
	if !ok {
		return
	}
	for _, m := range c.maybe {
		if int64(m.in)-a*int64(m.out) == z0-a {
			paired += m.rt
			pairedN++
		}
	}
	return
}

// pause is the longest an answer's parts were seen apart, as most looks
// in a pause saw it (their 90th percentile of the time since its last
// part came), and how many looks were in one.
func (c *connTrace) pause() (time.Duration, int) {
	if len(c.pauses) == 0 {
		return 0, 0
	}
	p := slices.Clone(c.pauses)
	slices.Sort(p)
	return time.Duration(p[len(p)*9/10]) * time.Millisecond, len(p)
}
