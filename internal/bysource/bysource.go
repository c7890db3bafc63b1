// Package bysource shares what the agent's listeners admit fairly among
// the addresses that reach them: failed authentications are counted per
// source and a source over its budget is refused before its token is
// even compared (the right token does not get a blocked source in), and
// the connections still to say who they are share their slots, so that
// one source's silent connections cannot lock out another's.
//
// A source is an IPv4 address, or an IPv6 /64 (what one host is usually
// given): a client cannot multiply its budget by walking its own subnet.
package bysource

import (
	"net"
	"net/netip"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Of is the source of a network address ("10.0.0.2:5000", "[::1]:80",
// or a bare IP): an IPv4 address or an IPv6 /64. An address that does
// not parse is its own source.
func Of(addr string) netip.Prefix {
	host := addr
	if h, _, err := net.SplitHostPort(addr); err == nil {
		host = h
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Prefix{}
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return netip.PrefixFrom(ip, 32)
	}
	p, _ := ip.Prefix(64)
	return p
}

// Failures is a token bucket of failed authentications per source.
type Failures struct {
	limit rate.Limit
	burst int
	max   int // sources tracked

	mu  sync.Mutex
	src map[netip.Prefix]*bucket
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time
}

// NewFailures allows each source burst failures, then per a second;
// max bounds the sources it tracks (the least recently failed are
// forgotten first).
func NewFailures(per float64, burst, max int) *Failures {
	return &Failures{limit: rate.Limit(per), burst: burst, max: max, src: map[netip.Prefix]*bucket{}}
}

// Blocked reports whether the source of addr has used its failures: it
// is refused whatever it presents until the bucket refills.
func (f *Failures) Blocked(addr string, now time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.src[Of(addr)]
	return b != nil && b.lim.TokensAt(now) < 1
}

// Fail counts a failed authentication from addr.
func (f *Failures) Fail(addr string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := Of(addr)
	b := f.src[p]
	if b == nil {
		if len(f.src) >= f.max {
			f.forget(now)
		}
		b = &bucket{lim: rate.NewLimiter(f.limit, f.burst)}
		f.src[p] = b
	}
	b.last = now
	b.lim.AllowN(now, 1)
}

// forget drops the sources whose bucket is full again (they carry no
// state), or else the one that failed least recently.
func (f *Failures) forget(now time.Time) {
	var oldest netip.Prefix
	var at time.Time
	for p, b := range f.src {
		if b.lim.TokensAt(now) >= float64(f.burst) {
			delete(f.src, p)
			continue
		}
		if at.IsZero() || b.last.Before(at) {
			oldest, at = p, b.last
		}
	}
	if len(f.src) >= f.max {
		delete(f.src, oldest)
	}
}

// Slots are the places for connections that have not yet said who they
// are, shared among sources: a source holds at most per, and when all
// are taken a newcomer takes the oldest slot of the source holding the
// most, if that source holds more than the newcomer would; else the
// oldest slot of another source, whatever it holds. A holder of the
// token says who it is as soon as it connects, so the connection silent
// the longest is never its own: it is locked out neither by a few
// sources' silent connections nor by many sources holding one each
// (unless they open every slot anew within its round trip).
type Slots struct {
	max, per int

	mu   sync.Mutex
	n    int
	seq  uint64                   // the order slots were taken in
	held map[netip.Prefix][]*Slot // oldest first
}

// Slot is one admitted connection's place; its Release frees it.
type Slot struct {
	s     *Slots
	src   netip.Prefix
	seq   uint64
	evict func()
	once  sync.Once
	gone  bool
}

// NewSlots makes max slots, at most per for one source.
func NewSlots(max, per int) *Slots {
	return &Slots{max: max, per: per, held: map[netip.Prefix][]*Slot{}}
}

// Acquire admits a connection from addr, or returns nil. evict is
// called (once, outside any lock of Slots) when another source takes
// the slot: it should close the connection, whose handler then calls
// Release as usual.
func (s *Slots) Acquire(addr string, evict func()) *Slot {
	p := Of(addr)
	s.mu.Lock()
	mine := len(s.held[p])
	if mine >= s.per {
		s.mu.Unlock()
		return nil
	}
	var victim *Slot
	if s.n >= s.max {
		var most netip.Prefix
		for q, l := range s.held {
			if len(l) > len(s.held[most]) {
				most = q
			}
			if q != p && (victim == nil || l[0].seq < victim.seq) {
				victim = l[0] // the oldest of another source
			}
		}
		if len(s.held[most]) > mine+1 {
			victim = s.held[most][0]
		}
		if victim == nil {
			s.mu.Unlock()
			return nil // every slot is the newcomer's own source's
		}
		s.drop(victim)
	}
	s.seq++
	sl := &Slot{s: s, src: p, seq: s.seq, evict: evict}
	s.held[p] = append(s.held[p], sl)
	s.n++
	s.mu.Unlock()
	if victim != nil && victim.evict != nil {
		victim.evict()
	}
	return sl
}

// drop removes sl from its source's list; s.mu is held.
func (s *Slots) drop(sl *Slot) {
	if sl.gone {
		return
	}
	sl.gone = true
	l := s.held[sl.src]
	for i, x := range l {
		if x == sl {
			l = append(l[:i], l[i+1:]...)
			break
		}
	}
	if len(l) == 0 {
		delete(s.held, sl.src)
	} else {
		s.held[sl.src] = l
	}
	s.n--
}

// Release frees the slot; later calls do nothing.
func (sl *Slot) Release() {
	sl.once.Do(func() {
		sl.s.mu.Lock()
		sl.s.drop(sl)
		sl.s.mu.Unlock()
	})
}

// Held is how many slots are taken, for tests and metrics.
func (s *Slots) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}
