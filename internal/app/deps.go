package app

import (
	"fmt"
	"sort"
	"time"
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
	// Nagle is what the connections showed of Nagle's algorithm meeting
	// delayed ACKs, when they showed any.
	Nagle *Nagle `json:"nagle,omitempty"`
}

// Nagle is what a dependency's connections showed of Nagle's algorithm
// meeting delayed ACKs: data one end wrote, held until the other end
// acknowledges what it sent before, which the other end delays up to its
// delayed-ACK timeout (40 ms at least), when it has nothing to send.
type Nagle struct {
	// Requests is the share of looks at which the server's own end held
	// data it had written: bytes not sent while a segment was
	// unacknowledged and the congestion window had room (tcpi_notsent_bytes
	// with tcpi_unacked) — a request split by Nagle, or corked.
	Requests float64 `json:"requests_held,omitempty"`
	// Answers is the same at the dependency's end, looked up as the
	// connection's other end when it is a socket of this namespace: its
	// answers held back.
	Answers float64 `json:"answers_held,omitempty"`
	// NoDelay is TCP_NODELAY on the server's connections, read on a copy
	// of each (pidfd_getfd): "on", "off", "mixed", or "" when not read;
	// PeerNoDelay the same on the dependency's ends that held answers.
	NoDelay     string `json:"nodelay,omitempty"`
	PeerNoDelay string `json:"peer_nodelay,omitempty"`
	// Pause is how long the answers' parts came apart, as the looks in a
	// pause saw it (the 90th percentile of the time since the last part
	// came), PauseShare the share of looks in one; DelayedACK the
	// delayed-ACK timeout the server's end would wait (tcpi_ato, the
	// highest of its connections). A pause as long as that timeout is the
	// server's delayed ACK releasing the rest of an answer.
	Pause      time.Duration `json:"pause,omitempty"`
	PauseShare float64       `json:"pause_share,omitempty"`
	DelayedACK time.Duration `json:"delayed_ack,omitempty"`
	// AcksPerRequest is the ACKs the server's end sent alone per
	// request: each delayed ACK that fired on its own is one.
	AcksPerRequest float64 `json:"acks_per_request,omitempty"`
}

// StallsAnswers reports whether the dependency's answers waited for the
// server's delayed ACK: held at the dependency's end in a tenth of its
// looks or more, or, when that end is not seen, parts of answers that
// came a delayed-ACK timeout apart in a tenth of the looks.
func (n *Nagle) StallsAnswers() bool {
	if n == nil {
		return false
	}
	return n.Answers >= NagleHeld || n.PauseNearAto()
}

// StallsRequests reports whether the server's own end held its requests
// back in a tenth of its looks or more.
func (n *Nagle) StallsRequests() bool { return n != nil && n.Requests >= NagleHeld }

// PauseNearAto reports whether answers paused, in a tenth of the looks
// or more, for about the delayed-ACK timeout: the rest of an answer
// cannot come before the ACK of its first part, which the server's end
// sends when that timer fires. The pause is the 90th percentile of what
// looks saw, in whole jiffies: two jiffies short of a 40 ms pause, a
// 50 ms pause (a backend's own) reads 48 ms.
func (n *Nagle) PauseNearAto() bool {
	return n != nil && n.DelayedACK > 0 && n.PauseShare >= NagleHeld &&
		n.Pause >= n.DelayedACK-8*time.Millisecond && n.Pause <= n.DelayedACK+4*time.Millisecond
}

// NagleHeld is the share of looks that must see data held back (or an
// answer paused for a delayed ACK) for it to be how the connection
// works, not a moment's autocorking.
const NagleHeld = 0.1

// nagleOf sums what a dependency's connections showed of Nagle's
// algorithm, nil when they showed nothing of it.
func nagleOf(held, peerHeld, looks, peerLooks, noDelay, delay int, pause time.Duration, pauseN, ato int, acksOut, reqs float64) *Nagle {
	n := &Nagle{Pause: pause, DelayedACK: time.Duration(ato) * time.Microsecond}
	if looks > 0 {
		n.Requests = float64(held) / float64(looks)
		n.PauseShare = float64(pauseN) / float64(looks)
	}
	if peerLooks > 0 {
		n.Answers = float64(peerHeld) / float64(peerLooks)
	}
	n.NoDelay = onOff(noDelay, delay)
	if reqs > 0 {
		n.AcksPerRequest = acksOut / reqs
	}
	if !n.StallsAnswers() && !n.StallsRequests() {
		return nil
	}
	return n
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
		held, peerN, peerHeld, pauseN int
		pause                         time.Duration
		noDelay, delay, ato           int
		peerOn, peerOff               int
		acksOut                       float64
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
		decided, busy, paired, pairedN := c.resolve()
		// A connection whose looks mostly stayed undecided gives no
		// share from the few that did: a movement decides busy looks
		// more often than idle ones (a request outstanding shows; an
		// idle look waits for the next movement, which many round trips
		// between two looks hide), and four pool connections each
		// decided in 3 of 52 looks read a fast backend 100 % busy.
		if decided > 0 && float64(decided) >= (1-maxLost)*float64(c.n) {
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
		reqs := float64(c.last.DataSegsOut - c.first.DataSegsOut)
		a.rtSum += reqs
		if known {
			// A connection whose every look decided nothing says
			// nothing of the busy share: not an idle one.
			a.busySec += share * secs
			a.secs += secs
			a.rtTimed += reqs
			a.paired += paired
			a.pairedN += pairedN
		}
		a.d.Samples = max(a.d.Samples, c.n)
		a.d.SegsOutPerSec += float64(c.last.DataSegsOut - c.first.DataSegsOut)
		a.d.SegsInPerSec += float64(c.last.DataSegsIn - c.first.DataSegsIn)
		a.d.BytesOutPerSec += float64(c.last.BytesAcked - c.first.BytesAcked)
		a.d.BytesInPerSec += float64(c.last.BytesReceived - c.first.BytesReceived)
		a.busyN += busy
		a.pipe += c.pipelined
		a.rtt = max(a.rtt, c.last.SRTT())
		if m, ok := c.last.MinRTTOK(); ok && (a.minRTT == 0 || m < a.minRTT) {
			a.minRTT = m
		}
		a.held += c.held
		a.peerN += c.peerN
		a.peerHeld += c.peerHeld
		if p, n := c.pause(); n > 0 {
			a.pause = max(a.pause, p)
			a.pauseN += n
		}
		switch c.noDelay {
		case optOn:
			a.noDelay++
		case optOff:
			a.delay++
		}
		switch c.peerNoDelay {
		case optOn:
			a.peerOn++
		case optOff:
			a.peerOff++
		}
		a.ato = max(a.ato, int(c.ato))
		if reqs > 0 {
			a.acksOut += float64(c.pureAcksOut)
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
		d.Nagle = nagleOf(a.held, a.peerHeld, a.samples, a.peerN, a.noDelay, a.delay, a.pause, a.pauseN, a.ato, a.acksOut, a.rtSum)
		if d.Nagle != nil {
			d.Nagle.PeerNoDelay = onOff(a.peerOn, a.peerOff)
		}
		if lost := 1 - float64(a.decided)/float64(a.samples); a.secs <= 0 || lost > maxLost {
			// The order of request and answer was lost in most looks:
			// no busy share, no time per round trip, rather than one
			// made of the few looks that kept it.
			d.Untimed = fmt.Sprintf("answers' ends not told apart from pauses in %.0f%% of looks (answers of several sizes, the next request in the same jiffy)", 100*lost)
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
			// Most round trips were timed one by one: their mean holds
			// where the ratio's edges do not (requests as long as the
			// trace, all begun at once).
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

// onOff names a setting read on several sockets: "on", "off", "mixed",
// or "" when read on none.
func onOff(on, off int) string {
	switch {
	case on > 0 && off > 0:
		return "mixed"
	case on > 0:
		return "on"
	case off > 0:
		return "off"
	}
	return ""
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
