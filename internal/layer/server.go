package layer

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netdoctor/netdoctor/internal/bysource"
)

// maxHandshakes bounds the connections that have not yet said who they
// are: a flood of idle connections holds no more than this, a source no
// more than handshakesPerSource, and a newcomer takes the oldest of the
// source holding the most, or the oldest of another source
// (bysource.Slots): room is always made for the token holder, who says
// hello at once.
const (
	maxHandshakes       = 32
	handshakesPerSource = 8
)

// A source may fail badBurst times, then once every 5 s: a wrong token
// already costs a second, so the bucket blocks those who try many at
// once.
const (
	badRate  = 0.2
	badBurst = 10
)

// Server is the test endpoint: a TCP listener for control connections
// and streams, a UDP socket on the same port for datagrams. Every test
// starts with the token; a stream or a datagram counts only with the id
// of a test in progress.
type Server struct {
	token [sha256.Size]byte
	log   *slog.Logger
	tests chan struct{}      // MaxTests slots
	hands *bysource.Slots    // maxHandshakes slots, shared by source
	bad   *bysource.Failures // failed authentications, by source
	// Unauthenticated counts datagrams and streams dropped for an
	// unknown test id.
	Unauthenticated atomic.Uint64

	mu     sync.Mutex
	active map[testID]*test
}

// NewServer returns an endpoint that admits clients holding token (which
// must not be empty). log may be nil.
func NewServer(token []byte, log *slog.Logger) (*Server, error) {
	if len(token) == 0 {
		return nil, errors.New("the test endpoint needs a token")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{token: sha256.Sum256(token), log: log, tests: make(chan struct{}, MaxTests),
		hands: bysource.NewSlots(maxHandshakes, handshakesPerSource), bad: bysource.NewFailures(badRate, badBurst, 4096), active: map[testID]*test{}}, nil
}

// test is one test in progress.
type test struct {
	id       testID
	hello    Hello
	deadline time.Time // the endpoint stops sending and reading then
	// end is when a TCP test's streams stop (unix nanoseconds): its
	// duration and a second from its last join, as the client counts
	// its window from its last join. Counted from the hello, a join
	// that waited for a lost SYN ended the streams before the client's
	// window did (a path probe over 5 % loss: EOF after 97 KB).
	end     atomic.Int64
	joinBy  time.Time // a TCP test's streams join before then
	sent    atomic.Int64
	joined  atomic.Int32 // streams admitted
	ended   atomic.Int32 // of them, those whose join has moved end
	streams sync.WaitGroup

	mu    sync.Mutex
	infos []StreamInfo
	recv  *receiver
	// A UDP download: the client's address, known from its first
	// datagram with the test's id, and the sender's stop and end.
	peer     net.Addr
	ctrlIP   net.IP // the control connection's peer: TCP proved it
	stopSend chan struct{}
	sendDone chan struct{}
	udpSent  atomic.Uint64
}

// Serve serves ln and pc until ctx ends, then closes both. pc may be nil
// (no UDP tests).
func (s *Server) Serve(ctx context.Context, ln net.Listener, pc net.PacketConn) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-ctx.Done()
		ln.Close()
		if pc != nil {
			pc.Close()
		}
	}()
	if pc != nil {
		roomy(pc)
		go s.serveUDP(pc)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		slot := s.hands.Acquire(c.RemoteAddr().String(), func() { c.Close() })
		if slot == nil {
			c.Close()
			continue
		}
		go s.handle(ctx, c, slot)
	}
}

// handle reads a connection's hello: a new test or a stream joining one.
func (s *Server) handle(ctx context.Context, c net.Conn, slot *bysource.Slot) {
	defer c.Close()
	release := slot.Release
	defer release()
	c.SetDeadline(time.Now().Add(handshakeLimit))
	r := bufio.NewReaderSize(c, maxLine)
	var h Hello
	if err := readMsg(r, &h); err != nil {
		return
	}
	if h.Join != "" {
		t := s.lookupJoin(h)
		if t == nil {
			s.Unauthenticated.Add(1)
			return
		}
		release()
		s.stream(t, c, r, h.Stream)
		return
	}
	// A source over its failures is refused before the comparison, the
	// right token too: no guessing at speed.
	src := c.RemoteAddr().String()
	if s.bad.Blocked(src, time.Now()) {
		return
	}
	sum := sha256.Sum256([]byte(h.Token))
	if subtle.ConstantTimeCompare(sum[:], s.token[:]) != 1 {
		// A wrong token costs a second.
		s.bad.Fail(src, time.Now())
		time.Sleep(time.Second)
		writeMsg(c, Reply{Error: "wrong token"})
		return
	}
	if err := check(h); err != nil {
		writeMsg(c, Reply{Error: err.Error()})
		return
	}
	select {
	case s.tests <- struct{}{}:
	default:
		writeMsg(c, Reply{Error: fmt.Sprintf("busy: %d tests are running, try again later", MaxTests)})
		return
	}
	defer func() { <-s.tests }()
	release()
	s.control(ctx, c, r, h)
}

// check enforces the endpoint's bounds on a test.
func check(h Hello) error {
	d := time.Duration(h.Duration) * time.Millisecond
	switch {
	case h.V != Version:
		return fmt.Errorf("protocol version %d, this endpoint speaks %d", h.V, Version)
	case h.Test != "tcp" && h.Test != "udp":
		return fmt.Errorf("test %q: tcp or udp", h.Test)
	case h.Dir != Up && h.Dir != Down:
		return fmt.Errorf("direction %q: up or down", h.Dir)
	case d <= 0 || d > MaxDuration:
		return fmt.Errorf("duration %v: at most %v", d, MaxDuration)
	case h.Test == "tcp" && (h.Streams < 1 || h.Streams > MaxStreams):
		return fmt.Errorf("%d streams: 1 to %d", h.Streams, MaxStreams)
	case h.Test == "udp" && (h.Rate <= 0 || h.Rate > MaxRate):
		return fmt.Errorf("rate %g packets/s: at most %d", h.Rate, MaxRate)
	case h.Test == "udp" && (h.Size < MinPacketSize || h.Size > MaxPacketSize):
		return fmt.Errorf("size %d: %d to %d bytes", h.Size, MinPacketSize, MaxPacketSize)
	}
	return nil
}

// control runs a test from its control connection: reply with the id,
// wait for the client's Done, answer with the Final account.
func (s *Server) control(ctx context.Context, c net.Conn, r *bufio.Reader, h Hello) {
	var id testID
	rand.Read(id[:])
	d := time.Duration(h.Duration) * time.Millisecond
	t := &test{id: id, hello: h, deadline: time.Now().Add(d + time.Second)}
	t.end.Store(t.deadline.UnixNano())
	t.joinBy = time.Now().Add(joinWindow)
	ctrlDeadline := t.deadline.Add(grace)
	switch {
	case h.Test == "udp" && h.Dir == Down:
		t.stopSend, t.sendDone = make(chan struct{}), make(chan struct{})
		if ta, ok := c.RemoteAddr().(*net.TCPAddr); ok {
			t.ctrlIP = ta.IP
		}
	case h.Test == "udp":
		t.recv = newReceiver(packetBudget(h.Rate, d))
	default:
		t.infos = make([]StreamInfo, h.Streams)
		ctrlDeadline = ctrlDeadline.Add(joinWindow)
	}
	s.mu.Lock()
	s.active[id] = t
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.active, id)
		s.mu.Unlock()
	}()
	s.log.Info("test endpoint: test", "client", c.RemoteAddr().String(), "test", h.Test, "dir", h.Dir, "streams", h.Streams, "duration", d, "rate", h.Rate)
	c.SetDeadline(ctrlDeadline)
	if err := writeMsg(c, Reply{ID: id.String()}); err != nil {
		return
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	var done Done
	if err := readMsg(r, &done); err != nil {
		return
	}
	var f Final
	switch {
	case t.stopSend != nil:
		f.UDP = t.stopSending()
	case t.recv != nil:
		t.mu.Lock()
		f.UDP = t.recv.stats(done.Sent)
		t.mu.Unlock()
	default:
		t.streams.Wait() // each ends by the deadline at the latest
		t.mu.Lock()
		f.Streams = t.infos
		t.mu.Unlock()
	}
	writeMsg(c, f)
}

// lookupJoin returns the TCP test a stream joins, nil when there is
// none or it has all its streams.
func (s *Server) lookupJoin(h Hello) *test {
	id, err := parseID(h.Join)
	if err != nil {
		return nil
	}
	s.mu.Lock()
	t := s.active[id]
	s.mu.Unlock()
	if t == nil || t.hello.Test != "tcp" || h.Stream < 0 || h.Stream >= t.hello.Streams ||
		int(t.joined.Add(1)) > t.hello.Streams || time.Now().After(t.joinBy) {
		return nil
	}
	t.streams.Add(1)
	// Never earlier: the joins' order is the client's, not the clock's.
	end := time.Now().Add(time.Duration(t.hello.Duration)*time.Millisecond + time.Second).UnixNano()
	for {
		old := t.end.Load()
		if end <= old || t.end.CompareAndSwap(old, end) {
			break
		}
	}
	t.ended.Add(1) // after end: streamEnd reads them in this order
	return t
}

// streamEnd is when t's streams stop: a duration and a second from the
// last join once all have joined; until then the latest a join may set.
func (t *test) streamEnd() time.Time {
	if int(t.ended.Load()) < t.hello.Streams {
		return t.joinBy.Add(time.Duration(t.hello.Duration)*time.Millisecond + time.Second)
	}
	return time.Unix(0, t.end.Load())
}

// stream carries one TCP stream of t until the client closes it or the
// test's deadline: the endpoint discards an upload and sends a download.
func (s *Server) stream(t *test, c net.Conn, r *bufio.Reader, i int) {
	defer t.streams.Done()
	bulk(c)
	// The end a later join moves is read again: at each read of an
	// upload (a deadline a read), before each write of a download.
	if t.hello.Dir == Up {
		discardUntil(c, r, t.streamEnd) // r: what the hello's read buffered, then c
		return
	}
	buf := make([]byte, blockSize)
	rand.Read(buf) // incompressible, should a middlebox compress
	for {
		end := t.streamEnd()
		if !time.Now().Before(end) || t.sent.Add(int64(len(buf))) > MaxBytes {
			break
		}
		c.SetDeadline(end)
		if _, err := c.Write(buf); err != nil {
			break
		}
	}
	if ti, ok := tcpInfo(c); ok {
		t.mu.Lock()
		t.infos[i] = ti
		t.mu.Unlock()
	}
}

// discardUntil reads r, c's, until end, which may move later while it
// reads, or until the peer closes.
func discardUntil(c net.Conn, r io.Reader, end func() time.Time) {
	for {
		e := end()
		c.SetReadDeadline(e)
		_, err := discard(r)
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() || !end().After(e) {
			return
		}
	}
}

// serveUDP counts the datagrams of the UDP tests in progress; any other
// is dropped.
func (s *Server) serveUDP(pc net.PacketConn) {
	buf := make([]byte, 64<<10)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		now := time.Now()
		id, seq, sent, ok := parseDatagram(buf[:n])
		if !ok {
			s.Unauthenticated.Add(1)
			continue
		}
		s.mu.Lock()
		t := s.active[id]
		s.mu.Unlock()
		if t == nil || t.hello.Test != "udp" || now.After(t.deadline) {
			s.Unauthenticated.Add(1)
			continue
		}
		if t.stopSend != nil {
			if !t.register(pc, addr) {
				s.Unauthenticated.Add(1)
			}
			continue
		}
		t.mu.Lock()
		t.recv.add(seq, sent, now)
		t.mu.Unlock()
	}
}

// register starts a UDP download towards addr, the source of the first
// datagram that carries the test's id (which only a client holding the
// token got) from the control connection's address: a spoofed source
// cannot turn the endpoint against a third host. Later ones change
// nothing. It returns false for a datagram from another address.
func (t *test) register(pc net.PacketConn, addr net.Addr) bool {
	ua, ok := addr.(*net.UDPAddr)
	if !ok || !ua.IP.Equal(t.ctrlIP) {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.peer == nil {
		t.peer = addr
		go t.sendUDP(pc, addr)
	}
	return true
}

// sendUDP sends a UDP download: the test's rate and size, for its
// duration from now, never past its deadline nor once stopped.
func (t *test) sendUDP(pc net.PacketConn, addr net.Addr) {
	defer close(t.sendDone)
	h := t.hello
	buf := make([]byte, h.Size)
	start := time.Now()
	end := start.Add(time.Duration(h.Duration) * time.Millisecond)
	if end.After(t.deadline) {
		end = t.deadline
	}
	interval := time.Duration(float64(time.Second) / h.Rate)
	budget := packetBudget(h.Rate, time.Duration(h.Duration)*time.Millisecond)
	var seq uint64
	for {
		now := time.Now()
		if !now.Before(end) {
			return
		}
		select {
		case <-t.stopSend:
			return
		default:
		}
		due := min(uint64(now.Sub(start)/interval)+1, budget)
		for ; seq < due; seq++ {
			putDatagram(buf, t.id, seq, time.Now())
			if _, err := pc.WriteTo(buf, addr); err == nil {
				t.udpSent.Add(1)
			}
		}
		time.Sleep(time.Until(start.Add(time.Duration(due) * interval)))
	}
}

// stopSending ends a UDP download, if it is still going, and returns
// what was sent: the client counts what it received.
func (t *test) stopSending() *UDPStats {
	close(t.stopSend)
	t.mu.Lock()
	started := t.peer != nil
	t.mu.Unlock()
	if started {
		<-t.sendDone
	}
	return &UDPStats{Sent: t.udpSent.Load()}
}
