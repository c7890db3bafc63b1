package load

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Connection states of the event loop.
const (
	cClosed = iota
	cConnecting
	cHandshake // https://: connected, the TLS handshake under way
	cWriting
	cReading
	cIdle    // connected, waiting for the pacer (open-loop mode)
	cDelayed // connected, waiting for the delay a script's delay() asked for
)

type conn struct {
	idx      int32
	fd       int // the socket (epoll) or its fixed-file slot (io_uring); -1 when closed
	state    uint8
	reserved bool // holds one unit of the -n budget
	wrOff    int
	rbytes   uint64
	p        *respParser
	start    time.Duration // latency origin, since the engine start
	deadline time.Duration
	req      []byte        // the request, or a script's
	out      []byte        // what goes on the wire: req, or its TLS records
	pending  int           // responses still due to the last write
	delayed  bool          // the script's delay() was served for the next request
	wake     time.Duration // end of the delay, in state cDelayed
	tls      *tlsConn      // https://: the connection's record layer
	// io_uring: the socket's generation, so that completions of a
	// closed one are told apart from the next one's in the same slot; a
	// send whose completion is awaited; a multishot receive armed.
	gen       uint32
	inflight  bool
	recv      bool
	eagerSent bool // the request went linked to the connect
}

// poller is the I/O of one event loop: epoll's readiness or io_uring's
// completions. It calls back into the worker when something happened
// (established, connectFailed, received, eof, written, failReq); the
// state machine, the pacing and the statistics are the worker's, shared.
type poller interface {
	// connect opens c's socket and starts connecting it; the worker
	// hears of the outcome through established (or, for an eager
	// request sent with the connect, sentWithConnect) or connectFailed.
	connect(c *conn) error
	// write sends c.out[c.wrOff:] and calls written once it is all on
	// its way, or failReq. Until then c.inflight is set and c.out is
	// left alone.
	write(c *conn)
	// drop closes c's socket; what was in flight on it is forgotten.
	drop(c *conn)
	// wait waits for events up to timeout (0: just look) and handles
	// them.
	wait(timeout time.Duration) error
	close()
}

// worker is one event-loop thread: non-blocking sockets on one epoll
// instance or one io_uring, driven on a locked OS thread like one wrk
// thread.
type worker struct {
	e      *engine
	id     int
	stats  *threadStats
	io     poller
	conns  []*conn
	active int // slots in use (grows with --ramp)
	share  func(total int) int
	buf    []byte         // epoll's reads, and TLS's plaintext
	sa     unsafe.Pointer // *unix.RawSockaddrInet4 or *unix.RawSockaddrInet6
	salen  uintptr
	family int
	tlsCfg *tls.Config // https://
	// Open-loop pacing: the next intended send time and the gap between
	// this thread's requests; starved while requests due found every
	// connection busy, until the thread catches up.
	rate     bool
	next     time.Duration
	interval time.Duration
	starved  bool
	// A script's Lua state, and the connections in state cDelayed with
	// the earliest end of their delays.
	lt       *luaThread
	delays   int
	nextWake time.Duration
}

func (e *engine) newWorker(id int) *worker {
	n := e.opts.Threads
	w := &worker{e: e, id: id, stats: e.threads[id], buf: make([]byte, 64<<10),
		share: func(total int) int { return (total - id + n - 1) / n }}
	port, _ := net.LookupPort("tcp", e.t.port)
	addr := e.addr
	req := e.req
	if e.script != nil {
		w.lt = e.script.threads[id]
		if a := w.lt.addr; a != nil { // setup's thread.addr
			addr, port = a.IP, a.Port
		}
		req = w.lt.static
	}
	if e.t.scheme == "https" {
		// Certificates are not verified, as with wrk: the target is the
		// system under test, not a party to trust.
		w.tlsCfg = &tls.Config{ServerName: e.t.hostname, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}
	}
	// The raw sockaddr is built once; connect(2) gets a pointer to it.
	pp := [2]byte{byte(port >> 8), byte(port)}
	if ip4 := addr.To4(); ip4 != nil {
		sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte(ip4)}
		sa.Port = *(*uint16)(unsafe.Pointer(&pp[0]))
		w.family, w.sa, w.salen = unix.AF_INET, unsafe.Pointer(sa), unsafe.Sizeof(*sa)
	} else {
		sa := &unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: [16]byte(addr.To16())}
		sa.Port = *(*uint16)(unsafe.Pointer(&pp[0]))
		w.family, w.sa, w.salen = unix.AF_INET6, unsafe.Pointer(sa), unsafe.Sizeof(*sa)
	}
	slots := w.share(e.opts.Connections)
	w.conns = make([]*conn, slots)
	for i := range w.conns {
		w.conns[i] = &conn{idx: int32(i), fd: -1, p: newRespParser(), req: req}
		w.conns[i].p.capt = w.lt.newCaptured() // nil unless response() reads them
	}
	if e.opts.Rate > 0 {
		w.rate = true
		w.interval = time.Duration(float64(time.Second) * float64(n) / e.opts.Rate)
		// Stagger the threads so their requests interleave.
		w.next = w.interval * time.Duration(id) / time.Duration(n)
	}
	return w
}

func (w *worker) now() time.Duration { return time.Since(w.e.start) }

// runWorker runs one event loop until the engine stops and returns the
// share of the run the thread spent on CPU.
func (e *engine) runWorker(id int) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	w := e.newWorker(id)
	var err error
	if w.io, err = e.newPoller(w); err != nil {
		e.threads[id].fail(errConn, string(e.engine)+": "+err.Error(), -1, 0)
		return 0
	}
	defer w.close()
	var lastCheck time.Duration = -time.Hour
	for !e.stop.Load() && (w.lt == nil || !w.lt.stopped.Load()) {
		now := w.now()
		if w.delays > 0 && now >= w.nextWake {
			w.wakeDelayed(now)
		}
		if now-lastCheck >= 10*time.Millisecond {
			w.maintain(now)
			lastCheck = now
		}
		wait := 10 * time.Millisecond
		if w.rate {
			w.dispatch(now)
			if w.next > now {
				w.starved = false
			}
			wait = min(wait, max(w.next-now, 0))
		}
		if w.delays > 0 {
			wait = min(wait, max(w.nextWake-now, 0))
		}
		if err := w.io.wait(wait); err != nil {
			w.stats.fail(errRead, string(e.engine)+": "+err.Error(), -1, w.now())
			break
		}
	}
	w.unsent()
	if s := time.Since(e.start).Seconds(); s > 0 {
		return (threadCPU() - cpu0) / s
	}
	return 0
}

// unsent counts the open-loop requests that were due by the end of the
// run and never sent: every connection was busy until then.
func (w *worker) unsent() {
	// Only a thread still starved at the end left requests waiting for a
	// connection; others are behind by a loop's wake-up at most. A -n
	// budget spent or a script's stop is no request left unsent.
	if !w.rate || !w.starved || w.e.opts.Requests > 0 || w.lt != nil && w.lt.stopped.Load() {
		return
	}
	end := w.now()
	if !w.e.end.IsZero() {
		end = min(end, w.e.end.Sub(w.e.start))
	}
	for n := 0; w.next <= end && n < maxUnsent; n++ {
		w.stats.unsent(w.next, end)
		w.next += w.interval
	}
}

// maxUnsent bounds the requests counted unsent per thread: a rate far
// beyond what the server answers leaves a long tail, and each is a
// histogram entry.
const maxUnsent = 1 << 20

func (w *worker) close() {
	for _, c := range w.conns {
		if c.tls != nil {
			c.tls.close()
		}
	}
	w.io.close()
}

// maintain opens the connections the ramp wants and expires requests
// past their timeout. It runs every 10 ms, not per event.
func (w *worker) maintain(now time.Duration) {
	want := min(w.share(w.e.targetConns(now)), len(w.conns))
	for i := range w.conns {
		c := w.conns[i]
		if i >= want {
			break
		}
		switch c.state {
		case cClosed:
			// Paced short connections, and a growing pool's, open
			// in dispatch.
			if !w.rate || !w.e.opts.NoKeepAlive && !w.e.opts.Grow {
				w.open(c, now)
			}
		case cConnecting, cHandshake, cWriting, cReading:
			if now > c.deadline {
				cause := "timeout"
				if c.state == cConnecting || c.state == cHandshake {
					cause = "connect-timeout"
				}
				w.failReq(c, errTime, cause)
			}
		}
	}
	w.active = want
}

// dispatch starts every paced request whose intended time has come, as
// long as a connection is free; the others wait, and their latency counts
// from the intended time. It returns after dispatchBudget, the rest
// waiting for the next turn of the loop: each request may open a
// connection, and connect() walks the local ports in use (with 25 000 of
// 28 000 held, in TIME_WAIT mostly, a capacity step at 16 000 requests a
// second spent 11 s dispatching the requests a stall had left due, past
// its end, answering nothing meanwhile).
func (w *worker) dispatch(now time.Duration) {
	for n := 0; w.next <= now; n++ {
		if n%dispatchCheck == dispatchCheck-1 && (w.now()-now > dispatchBudget || w.e.stop.Load()) {
			return
		}
		c := w.free()
		if c == nil {
			// Every connection is busy: the requests due wait here,
			// in the generator (Result.Queued).
			w.starved = true
			return
		}
		if !w.e.take() {
			return
		}
		origin := w.next
		w.next += w.interval
		if w.starved {
			w.stats.waited(1)
		}
		if c.state == cClosed {
			c.reserved = true
			w.connect(c, origin)
		} else {
			c.reserved = true
			w.send(c, origin, now)
		}
	}
}

// A dispatch turn ends after dispatchBudget, looked at every
// dispatchCheck requests.
const (
	dispatchBudget = 10 * time.Millisecond
	dispatchCheck  = 32
)

// free returns a connection ready to carry a paced request: an idle
// one, else (short connections, a growing pool) one to open.
func (w *worker) free() *conn {
	var closed *conn
	for _, c := range w.conns[:w.active] {
		switch {
		case c.state == cIdle:
			return c
		case c.state == cClosed && closed == nil && (w.e.opts.NoKeepAlive || w.e.opts.Grow):
			closed = c
		}
	}
	return closed
}

// open starts a connection in closed-loop mode.
func (w *worker) open(c *conn, now time.Duration) {
	if w.e.stop.Load() {
		return
	}
	if w.e.opts.NoKeepAlive {
		// The request starts with its connection.
		if !w.e.take() {
			return
		}
		c.reserved = true
	}
	w.connect(c, now)
}

func (w *worker) connect(c *conn, origin time.Duration) {
	c.start = origin
	if w.tlsCfg != nil {
		c.tls = newTLSConn(w.tlsCfg)
	}
	c.state = cConnecting
	c.deadline = w.now() + w.e.opts.Timeout
	if err := w.io.connect(c); err != nil {
		w.connectFailed(c, err)
	}
}

// eager says whether c's request is ready to go the moment c connects:
// a short connection's or a paced one's, with no script to ask and no
// TLS first. The io_uring engine links its send to the connect.
func (w *worker) eager(c *conn) bool {
	return w.tlsCfg == nil && w.lt == nil && c.reserved && (w.e.opts.NoKeepAlive || w.rate)
}

// sentWithConnect: c connected and its request, linked to the connect
// (eager), went out with it.
func (w *worker) sentWithConnect(c *conn, now time.Duration) {
	w.stats.connected()
	if !w.prepare(c, now) { // cannot happen for an eager one, but keep the books right
		return
	}
	c.deadline = now + w.e.opts.Timeout
	c.out, c.wrOff = c.req, 0
	c.state = cReading
}

func (w *worker) connectFailed(c *conn, err error) {
	c.state = cClosed
	c.tls = nil
	now := w.now()
	w.stats.fail(errConn, connectCause(err), now-c.start, now)
	w.settle(c)
}

func (w *worker) settle(c *conn) {
	if c.reserved {
		c.reserved = false
		w.e.settle()
	}
}

// established: c's connect succeeded. Over https:// the handshake comes
// first.
func (w *worker) established(c *conn, now time.Duration) {
	w.stats.connected()
	if c.tls != nil {
		c.state = cHandshake
		done, err := c.tls.handshake()
		w.handshook(c, now, done, err)
		return
	}
	w.ready(c, now)
}

// handshook goes on after the handshake moved: its records to send,
// its end.
func (w *worker) handshook(c *conn, now time.Duration, done bool, err error) {
	if err != nil {
		w.handshakeFailed(c, err)
		return
	}
	w.flushTLS(c)
	if done && c.state == cHandshake {
		w.ready(c, now)
	}
}

func (w *worker) handshakeFailed(c *conn, err error) {
	now := w.now()
	w.stats.fail(errConn, tlsCause(err), now-c.start, now)
	w.settle(c)
	w.drop(c)
	c.state = cClosed
}

// flushTLS sends the records crypto/tls wrote outside a request (the
// handshake's, an answer to a key update), unless a write is under way:
// written sends them after it.
func (w *worker) flushTLS(c *conn) {
	if c.inflight || c.fd < 0 {
		return
	}
	if b := c.tls.pending(); b != nil {
		c.out, c.wrOff = b, 0
		w.io.write(c)
	}
}

// ready: c is connected (and its TLS up); its first request goes now, or
// it waits for the pacer.
func (w *worker) ready(c *conn, now time.Duration) {
	if c.reserved || !w.rate {
		origin := now
		if w.e.opts.NoKeepAlive || w.rate {
			origin = c.start // short connections and paced requests count from their start
		}
		w.send(c, origin, now)
		return
	}
	c.state = cIdle
}

// wakeDelayed sends the requests whose delay has ended and finds the
// next end.
func (w *worker) wakeDelayed(now time.Duration) {
	next := time.Duration(-1)
	for _, c := range w.conns {
		if c.state != cDelayed {
			continue
		}
		if c.wake <= now {
			w.delays--
			w.send(c, now, now)
			continue
		}
		if next < 0 || c.wake < next {
			next = c.wake
		}
	}
	w.nextWake = next
}

// scriptFailed stops the run for a script error on c.
func (w *worker) scriptFailed(c *conn, err error) {
	w.e.fail(err)
	w.settle(c)
	w.drop(c)
	c.state = cClosed
}

// prepare readies c's next request: delay() may put it off first
// (false), request() makes it.
func (w *worker) prepare(c *conn, now time.Duration) bool {
	if lt := w.lt; lt != nil && lt.delay != nil && !w.rate && !c.delayed {
		d, err := lt.callDelay()
		if err != nil {
			w.scriptFailed(c, err)
			return false
		}
		c.delayed = true
		if d > 0 {
			c.state = cDelayed
			c.wake = now + d
			if w.delays == 0 || c.wake < w.nextWake {
				w.nextWake = c.wake
			}
			w.delays++
			return false
		}
	}
	c.delayed = false
	if !c.reserved && !w.e.opts.NoKeepAlive {
		if !w.e.take() {
			c.state = cIdle
			return false
		}
		c.reserved = true
	}
	head := w.e.head
	if lt := w.lt; lt != nil && lt.request != nil {
		s, err := lt.call(lt.request)
		if err != nil {
			w.scriptFailed(c, err)
			return false
		}
		// The string's bytes are written as they are, without a copy:
		// c.req keeps the string alive until the next request.
		c.req = unsafe.Slice(unsafe.StringData(s), len(s))
		head = len(s) > 5 && s[:5] == "HEAD "
	}
	c.pending = int(w.e.unit)
	c.p.reset(head)
	c.rbytes = 0
	return true
}

// send starts a request on a connected socket.
func (w *worker) send(c *conn, origin, now time.Duration) {
	if !w.prepare(c, now) {
		return
	}
	w.sendPrepared(c, origin, now)
}

// sendPrepared writes the request prepare made.
func (w *worker) sendPrepared(c *conn, origin, now time.Duration) {
	c.start = origin
	c.deadline = now + w.e.opts.Timeout
	c.state = cWriting
	if c.tls != nil {
		// The records join what crypto/tls has pending; they go now,
		// or (a write of earlier records still under way, which c.out
		// and c.wrOff belong to) when that one is written.
		if err := c.tls.write(c.req); err != nil {
			w.failReq(c, errWrite, tlsCause(err))
			return
		}
		w.flushTLS(c)
		return
	}
	c.out, c.wrOff = c.req, 0
	w.io.write(c)
}

// written: c.out went out whole. Over TLS, what crypto/tls wrote
// meanwhile goes next, and the request is written once none is left.
func (w *worker) written(c *conn) {
	c.inflight = false
	if c.tls != nil {
		w.flushTLS(c)
		if c.inflight || c.fd < 0 {
			return
		}
	}
	if c.state == cWriting {
		c.state = cReading
	}
}

// received hands bytes the socket delivered to c: to its TLS, its
// parser, or (an idle connection) the news that the server closed it.
// It returns whether c goes on reading the same response from the same
// socket.
func (w *worker) received(c *conn, b []byte, now time.Duration) bool {
	if c.tls != nil {
		return w.receivedTLS(c, b, now)
	}
	switch c.state {
	case cReading, cWriting:
		return w.plain(c, b, now)
	case cIdle, cDelayed:
		w.closedIdle(c)
	}
	return false
}

func (w *worker) receivedTLS(c *conn, b []byte, now time.Duration) bool {
	if c.state == cHandshake {
		done, err := c.tls.feed(b)
		w.handshook(c, now, done, err)
		if c.state == cHandshake || c.state == cClosed {
			return c.state == cHandshake
		}
		b = nil // the records after the handshake's are read below
	} else if c.state != cClosed {
		c.tls.feed(b)
	}
	for gen, fd := c.gen, c.fd; c.fd == fd && c.gen == gen && c.fd >= 0; {
		n, err := c.tls.read(w.buf)
		if n > 0 {
			switch c.state {
			case cReading, cWriting:
				if !w.plain(c, w.buf[:n], now) {
					return false
				}
			default: // bytes nobody asked for: the server is done with c
				w.closedIdle(c)
				return false
			}
		}
		if errors.Is(err, io.EOF) { // close_notify
			w.eof(c, now)
			return false
		}
		if err != nil {
			w.failReq(c, errRead, tlsCause(err))
			return false
		}
		if n == 0 {
			w.flushTLS(c) // what reading made crypto/tls answer
			return true
		}
	}
	return false
}

// plain hands response bytes to c's parser. It returns whether c goes
// on reading the same response.
func (w *worker) plain(c *conn, b []byte, now time.Duration) bool {
	for {
		used, done, perr := c.p.feed(b)
		c.rbytes += uint64(used)
		if perr != nil {
			w.failReq(c, errRead, "malformed")
			return false
		}
		if !done {
			return true
		}
		if c.pending > 1 { // a script's pipeline: more responses follow
			if !w.pipelined(c) {
				return false
			}
			if b = b[used:]; len(b) == 0 {
				return true
			}
			continue
		}
		w.complete(c, now, used < len(b))
		return false
	}
}

// eof: the server closed c.
func (w *worker) eof(c *conn, now time.Duration) {
	switch c.state {
	case cReading, cWriting:
		done, perr := c.p.eof()
		if perr != nil || !done || c.pending > 1 {
			w.failReq(c, errRead, "closed")
			return
		}
		w.complete(c, now, false)
	case cHandshake:
		w.handshakeFailed(c, errors.New("closed"))
	case cIdle, cDelayed:
		w.closedIdle(c)
	}
}

// closedIdle: an idle keep-alive connection was closed by the server
// (keepalive_timeout). Not a request error.
func (w *worker) closedIdle(c *conn) {
	if c.state == cDelayed {
		w.delays--
		c.delayed = false
	}
	w.drop(c)
	c.state = cClosed
}

// pipelined counts a response of a pipeline before its last, whose
// latency alone is recorded, as wrk does. It returns false if the
// script failed.
func (w *worker) pipelined(c *conn) bool {
	w.stats.count(c.p.status(), c.rbytes)
	if !w.response(c) {
		return false
	}
	c.pending--
	c.rbytes = 0
	c.p.reset(len(c.req) > 5 && string(c.req[:5]) == "HEAD ")
	return true
}

// response hands a response to the script's response(), if it has one.
func (w *worker) response(c *conn) bool {
	if w.lt == nil || w.lt.response == nil {
		return true
	}
	if err := w.lt.callResponse(c.p.status(), c.p.capt); err != nil {
		w.scriptFailed(c, err)
		return false
	}
	return true
}

// complete records a response and starts what follows it on c.
func (w *worker) complete(c *conn, now time.Duration, extra bool) {
	w.stats.record(now-c.start, now, c.p.status(), c.rbytes)
	if !w.response(c) {
		return
	}
	w.settle(c)
	if extra {
		w.stats.mu.Lock()
		w.stats.causes["unsolicited-bytes"]++
		w.stats.mu.Unlock()
	}
	// A response that came while its request was still being written
	// (the server answered early): the connection is not reused, so
	// that no request starts before the last one's bytes are out.
	if extra || w.e.opts.NoKeepAlive || !c.p.keepAlive() || c.inflight {
		w.drop(c)
		c.state = cClosed
		if !w.rate && !w.e.stop.Load() {
			w.open(c, now)
		}
		return
	}
	if w.rate {
		c.state = cIdle
		return
	}
	w.send(c, now, now)
}

// failReq counts a failed request and replaces its connection.
func (w *worker) failReq(c *conn, class int, cause string) {
	now := w.now()
	w.stats.fail(class, cause, now-c.start, now)
	w.settle(c)
	w.drop(c)
	c.state = cClosed
	// Reopened by maintain, at most every 10 ms: a refusing server is
	// not hammered in a tight loop.
}

// drop closes c's socket and its TLS.
func (w *worker) drop(c *conn) {
	if c.fd >= 0 {
		if c.state != cConnecting {
			w.stats.open.Add(-1)
		}
		w.io.drop(c)
	}
	if c.tls != nil {
		c.tls.close()
		c.tls = nil
	}
	c.out, c.wrOff, c.inflight = nil, 0, false
}
