package load

import (
	"errors"
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
	cWriting
	cReading
	cIdle    // connected, waiting for the pacer (open-loop mode)
	cDelayed // connected, waiting for the delay a script's delay() asked for
)

type conn struct {
	idx      int32
	fd       int
	state    uint8
	reserved bool // holds one unit of the -n budget
	wrOff    int
	rbytes   uint64
	p        *respParser
	start    time.Duration // latency origin, since the engine start
	deadline time.Duration
	req      []byte        // what send writes: the request, or a script's
	pending  int           // responses still due to the last write
	delayed  bool          // the script's delay() was served for the next request
	wake     time.Duration // end of the delay, in state cDelayed
}

// worker is one event-loop thread: non-blocking sockets on one epoll
// instance, driven on a locked OS thread like one wrk thread.
type worker struct {
	e      *engine
	stats  *threadStats
	ep     int
	conns  []*conn
	active int // slots in use (grows with --ramp)
	share  func(total int) int
	buf    []byte
	events []unix.EpollEvent
	sa     unsafe.Pointer // *unix.RawSockaddrInet4 or *unix.RawSockaddrInet6
	salen  uintptr
	family int
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

func (e *engine) newWorker(id int) (*worker, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	n := e.opts.Threads
	w := &worker{e: e, stats: e.threads[id], ep: ep, buf: make([]byte, 64<<10),
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
	w.events = make([]unix.EpollEvent, max(slots, 1))
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
	return w, nil
}

func (w *worker) now() time.Duration { return time.Since(w.e.start) }

// runWorker runs one event loop until the engine stops and returns the
// share of the run the thread spent on CPU.
func (e *engine) runWorker(id int) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu0 := threadCPU()
	w, err := e.newWorker(id)
	if err != nil {
		e.threads[id].fail(errConn, "epoll: "+err.Error(), -1, 0)
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
		n, err := epollWait(w.ep, w.events, int((wait+time.Millisecond-1)/time.Millisecond))
		if err != nil && !errors.Is(err, unix.EINTR) {
			w.stats.fail(errRead, "epoll: "+err.Error(), -1, w.now())
			break
		}
		now = w.now()
		for i := 0; i < n; i++ {
			w.handle(&w.events[i], now)
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
		if c.fd >= 0 {
			unix.Close(c.fd)
			c.fd = -1
		}
	}
	unix.Close(w.ep)
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
		case cConnecting, cWriting, cReading:
			if now > c.deadline {
				cause := "timeout"
				if c.state == cConnecting {
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
	fd, err := rawSocket(w.family)
	if err != nil {
		w.connectFailed(c, err)
		return
	}
	// No TCP_NODELAY: each request goes out in one write after the
	// previous response (which acknowledged it), so Nagle never holds it
	// back, and the setsockopt would cost a syscall per connection.
	err = rawConnect(fd, w.sa, w.salen)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		rawClose(fd)
		w.connectFailed(c, err)
		return
	}
	// Edge-triggered, for reading and writing at once: the socket is
	// registered once and never modified (wrk switches its interest with
	// epoll_ctl; that is a syscall per connection saved here). Reads go
	// on until the response is complete or a read comes back short, so
	// no edge is missed; a write that hits EAGAIN gets its EPOLLOUT edge
	// when the buffer drains.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: c.idx}
	if err := rawEpollAdd(w.ep, fd, &ev); err != nil {
		rawClose(fd)
		w.connectFailed(c, err)
		return
	}
	c.fd, c.state = fd, cConnecting
	c.deadline = w.now() + w.e.opts.Timeout
}

func (w *worker) connectFailed(c *conn, err error) {
	c.state = cClosed
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

func (w *worker) handle(ev *unix.EpollEvent, now time.Duration) {
	c := w.conns[ev.Fd]
	switch c.state {
	case cConnecting:
		if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			// Only a failed connect raises these; SO_ERROR says why.
			// A successful one is just EPOLLOUT, with no syscall to ask.
			var err error = unix.ECONNREFUSED
			if errno, gerr := unix.GetsockoptInt(c.fd, unix.SOL_SOCKET, unix.SO_ERROR); gerr == nil && errno != 0 {
				err = unix.Errno(errno)
			}
			w.drop(c)
			w.connectFailed(c, err)
			return
		}
		if ev.Events&unix.EPOLLOUT != 0 {
			w.established(c, now)
		}
	case cWriting:
		if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			w.failReq(c, errWrite, "reset")
			return
		}
		if ev.Events&unix.EPOLLOUT != 0 {
			w.write(c, now)
		}
	case cReading:
		w.read(c, now)
	case cIdle, cDelayed:
		// An idle keep-alive connection became readable: the server
		// closed it (keepalive_timeout). Not a request error. (With
		// edge-triggering, EPOLLOUT alone can be reported too: ignore.)
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			if c.state == cDelayed {
				w.delays--
				c.delayed = false
			}
			w.drop(c)
			c.state = cClosed
		}
	}
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

func (w *worker) established(c *conn, now time.Duration) {
	w.stats.connected()
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

// send starts a request on a connected socket. With a script, delay()
// may put it off first, and request() makes it.
func (w *worker) send(c *conn, origin, now time.Duration) {
	if lt := w.lt; lt != nil && lt.delay != nil && !w.rate && !c.delayed {
		d, err := lt.callDelay()
		if err != nil {
			w.scriptFailed(c, err)
			return
		}
		c.delayed = true
		if d > 0 {
			c.state = cDelayed
			c.wake = now + d
			if w.delays == 0 || c.wake < w.nextWake {
				w.nextWake = c.wake
			}
			w.delays++
			return
		}
	}
	c.delayed = false
	if !c.reserved && !w.e.opts.NoKeepAlive {
		if !w.e.take() {
			c.state = cIdle
			return
		}
		c.reserved = true
	}
	head := w.e.head
	if lt := w.lt; lt != nil && lt.request != nil {
		s, err := lt.call(lt.request)
		if err != nil {
			w.scriptFailed(c, err)
			return
		}
		// The string's bytes are written as they are, without a copy:
		// c.req keeps the string alive until the next request.
		c.req = unsafe.Slice(unsafe.StringData(s), len(s))
		head = len(s) > 5 && s[:5] == "HEAD "
	}
	c.pending = int(w.e.unit)
	c.start = origin
	c.deadline = now + w.e.opts.Timeout
	c.p.reset(head)
	c.wrOff, c.rbytes = 0, 0
	w.write(c, now)
}

func (w *worker) write(c *conn, now time.Duration) {
	req := c.req
	for c.wrOff < len(req) {
		n, err := rawWrite(c.fd, req[c.wrOff:])
		if errors.Is(err, unix.EAGAIN) {
			c.state = cWriting
			return
		}
		if err != nil {
			w.failReq(c, errWrite, connectCause(err))
			return
		}
		c.wrOff += n
	}
	c.state = cReading
}

func (w *worker) read(c *conn, now time.Duration) {
	for {
		n, err := rawRead(c.fd, w.buf)
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil {
			w.failReq(c, errRead, connectCause(err))
			return
		}
		if n == 0 {
			done, perr := c.p.eof()
			if perr != nil || !done {
				w.failReq(c, errRead, "closed")
				return
			}
			w.complete(c, now, false)
			return
		}
		b := w.buf[:n]
		for {
			used, done, perr := c.p.feed(b)
			c.rbytes += uint64(used)
			if perr != nil {
				w.failReq(c, errRead, "malformed")
				return
			}
			if !done {
				break
			}
			if c.pending > 1 { // a script's pipeline: more responses follow
				if !w.pipelined(c) {
					return
				}
				if b = b[used:]; len(b) == 0 {
					break
				}
				continue
			}
			w.complete(c, now, used < len(b))
			return
		}
		if n < len(w.buf) {
			return // drained; wait for more
		}
	}
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
	if extra || w.e.opts.NoKeepAlive || !c.p.keepAlive() {
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

// drop closes c's socket.
func (w *worker) drop(c *conn) {
	if c.fd < 0 {
		return
	}
	if c.state != cConnecting {
		w.stats.open.Add(-1)
	}
	rawClose(c.fd) // also removes it from the epoll set
	c.fd = -1
}

// epollWait is epoll_wait(2) as a raw syscall. The event loop owns its
// thread and its P; handing the P over whenever epoll_wait blocks (what
// syscall.Syscall allows the scheduler to do) costs futex wake-ups and
// context switches on the loop's CPU for nothing. The wait is bounded
// (10 ms at most), and Run keeps a spare P for the rest of the program.
func epollWait(ep int, events []unix.EpollEvent, msec int) (int, error) {
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(ep), uintptr(unsafe.Pointer(unsafe.SliceData(events))), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

// The event loop makes every per-request syscall raw, without the
// scheduler hand-off of syscall.Syscall: the sockets are non-blocking, so
// each returns at once. It matters beyond the ~50 ns saved per call: a
// connect or close on loopback can take over 20 µs (the peer's side runs
// inline), and sysmon would then hand the P to another thread and keep
// waking every 20 µs itself — measured at ~4000 context switches a
// second, 5 % of the CPU per short connection, against wrk's ~150.

func rawSocket(family int) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_SOCKET, uintptr(family), unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func rawConnect(fd int, sa unsafe.Pointer, salen uintptr) error {
	if _, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(sa), salen); e != 0 {
		return e
	}
	return nil
}

func rawEpollAdd(ep, fd int, ev *unix.EpollEvent) error {
	if _, _, e := unix.RawSyscall6(unix.SYS_EPOLL_CTL, uintptr(ep), unix.EPOLL_CTL_ADD, uintptr(fd), uintptr(unsafe.Pointer(ev)), 0, 0); e != 0 {
		return e
	}
	return nil
}

func rawClose(fd int) { unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0) }

func rawRead(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}

func rawWrite(fd int, b []byte) (int, error) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(unsafe.SliceData(b))), uintptr(len(b)))
	if e != 0 {
		return 0, e
	}
	return int(n), nil
}
