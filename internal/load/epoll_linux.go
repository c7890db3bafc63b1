package load

import (
	"errors"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// epoller is the epoll engine's I/O: non-blocking sockets registered once
// (edge-triggered), raw read/write/epoll_pwait2.
type epoller struct {
	w      *worker
	ep     int
	events []unix.EpollEvent
	ts     unix.Timespec
	pwait2 bool // epoll_pwait2(2) (Linux 5.11): a timeout in nanoseconds
}

func newEpoller(w *worker) (*epoller, error) {
	ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &epoller{w: w, ep: ep, events: make([]unix.EpollEvent, max(len(w.conns), 1)), pwait2: true}, nil
}

func (p *epoller) close() {
	for _, c := range p.w.conns {
		if c.fd >= 0 {
			rawClose(c.fd)
			c.fd = -1
		}
	}
	unix.Close(p.ep)
}

func (p *epoller) connect(c *conn) error {
	fd, err := rawSocket(p.w.family)
	if err != nil {
		return err
	}
	// No TCP_NODELAY: each request goes out in one write after the
	// previous response (which acknowledged it), so Nagle never holds it
	// back, and the setsockopt would cost a syscall per connection.
	//
	// Nor TCP_DEFER_ACCEPT (or TCP_QUICKACK 0), which on a connecting
	// socket holds the handshake's last ACK until the request carries
	// it: a short connection's 10 segments become 8 and its CPU 10 %
	// less (measured on both engines), but the server then keeps the
	// half-open connection in its SYN queue until this loop gets round
	// to sending, not until the kernel answers: a busy client moves the
	// server's pressure from its accept queue to its SYN queue. (CI run
	// 38, with it, on busy CPUs: TestRunSYNQueue saw the SYN queue's
	// drops and no ListenOverflows at all; one run, but the mechanism
	// is this.) The server must see the handshake end as any client's
	// kernel ends it (TestHandshakeEndsAtOnce).
	err = rawConnect(fd, p.w.sa, p.w.salen)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		rawClose(fd)
		return err
	}
	// Edge-triggered, for reading and writing at once: the socket is
	// registered once and never modified (wrk switches its interest with
	// epoll_ctl; that is a syscall per connection saved here). Reads go
	// on until the response is complete or a read comes back short, so
	// no edge is missed; a write that hits EAGAIN gets its EPOLLOUT edge
	// when the buffer drains.
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: c.idx}
	if err := rawEpollAdd(p.ep, fd, &ev); err != nil {
		rawClose(fd)
		return err
	}
	c.fd = fd
	return nil
}

func (p *epoller) drop(c *conn) {
	rawClose(c.fd) // also removes it from the epoll set
	c.fd = -1
}

func (p *epoller) write(c *conn) {
	for c.wrOff < len(c.out) {
		n, err := rawWrite(c.fd, c.out[c.wrOff:])
		if errors.Is(err, unix.EAGAIN) {
			c.inflight = true // the EPOLLOUT edge goes on with it
			return
		}
		if err != nil {
			p.w.failReq(c, errWrite, connectCause(err))
			return
		}
		c.wrOff += n
	}
	p.w.written(c)
}

func (p *epoller) wait(timeout time.Duration) error {
	n, err := p.epollWait(timeout)
	if err != nil && !errors.Is(err, unix.EINTR) {
		return err
	}
	now := p.w.now()
	for i := 0; i < n; i++ {
		p.handle(&p.events[i], now)
	}
	return nil
}

func (p *epoller) handle(ev *unix.EpollEvent, now time.Duration) {
	w := p.w
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
	case cWriting, cReading, cHandshake:
		fd := c.fd
		if c.inflight {
			if ev.Events&(unix.EPOLLERR|unix.EPOLLHUP) != 0 && ev.Events&unix.EPOLLIN == 0 {
				w.failReq(c, errWrite, "reset")
				return
			}
			if ev.Events&unix.EPOLLOUT != 0 {
				p.write(c)
			}
		}
		// Only an event that says so is read: an edge for EPOLLOUT
		// alone (the server's ACK of the request, before its
		// response, as on a new connection, in quick-ack mode) would
		// cost a read that finds nothing.
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 && c.state != cWriting && c.fd == fd {
			p.read(c, now)
		}
	case cIdle, cDelayed:
		// An idle keep-alive connection became readable: the server
		// closed it (keepalive_timeout), or, over TLS, sent a record
		// of its own (a session ticket) that crypto/tls takes. (With
		// edge-triggering, EPOLLOUT alone can be reported too: ignore.)
		if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLERR|unix.EPOLLHUP) != 0 {
			if c.tls != nil {
				p.read(c, now)
				return
			}
			w.closedIdle(c)
		}
	}
}

// read reads until c's response is complete or the socket is drained:
// a short read means nothing more is there, so no read ends in EAGAIN
// on that path.
func (p *epoller) read(c *conn, now time.Duration) {
	w := p.w
	for fd := c.fd; c.fd == fd; {
		n, err := rawRead(fd, w.buf)
		if errors.Is(err, unix.EAGAIN) {
			return
		}
		if err != nil {
			if c.state == cHandshake {
				w.handshakeFailed(c, err)
			} else {
				w.failReq(c, errRead, connectCause(err))
			}
			return
		}
		if n == 0 {
			w.eof(c, now)
			return
		}
		if !w.received(c, w.buf[:n], now) || n < len(w.buf) {
			return // complete, or drained: wait for more
		}
	}
}

// epollWait waits up to timeout: epoll_pwait2(2) takes it in
// nanoseconds, so the open loop's next send time is kept to the timer's
// slack rather than rounded up to a millisecond (epoll_wait(2), the
// fallback before 5.11). It is a raw syscall: the event loop owns its
// thread and its P; handing the P over whenever the wait blocks (what
// syscall.Syscall allows the scheduler to do) costs futex wake-ups and
// context switches on the loop's CPU for nothing. The wait is bounded
// (10 ms at most), and Run keeps a spare P for the rest of the program.
func (p *epoller) epollWait(timeout time.Duration) (int, error) {
	evs := uintptr(unsafe.Pointer(unsafe.SliceData(p.events)))
	if p.pwait2 {
		p.ts = unix.NsecToTimespec(int64(timeout))
		n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT2, uintptr(p.ep), evs, uintptr(len(p.events)), uintptr(unsafe.Pointer(&p.ts)), 0, 0)
		if e != unix.ENOSYS {
			if e != 0 {
				return 0, e
			}
			return int(n), nil
		}
		p.pwait2 = false
	}
	msec := int((timeout + time.Millisecond - 1) / time.Millisecond)
	n, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(p.ep), evs, uintptr(len(p.events)), uintptr(msec), 0, 0)
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
