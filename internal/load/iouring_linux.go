package load

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/load/uring"
	"golang.org/x/sys/unix"
)

// The io_uring engine's design, per event-loop thread:
//
//   - One ring (SINGLE_ISSUER|DEFER_TASKRUN: the kernel runs the
//     receives' work only inside io_uring_enter, on this thread, never by
//     interrupting it), one io_uring_enter per turn of the loop: it
//     submits everything the turn queued and waits for the next
//     completion, with the turn's timeout (the pacer's next send, a
//     script's delay, 10 ms at most) as its own argument, so no timer
//     request is queued per request.
//   - Sockets live in fixed-file slots, one per connection (no
//     descriptor table, no reference counting per operation), made by
//     IORING_OP_SOCKET linked to the connect, which is linked to a
//     multishot receive: a connection costs one submission of three
//     requests and no system call of its own. An eager request (a short
//     connection's, a paced one's) is linked after the connect too.
//   - Each connection keeps one multishot receive armed for its whole
//     life, into a provided-buffer ring shared by the thread's
//     connections: a response is one completion, no request of its own.
//     Buffers go back to the ring as soon as the parser has read them.
//   - A request of at most smallSend bytes is sent with
//     IOSQE_CQE_SKIP_SUCCESS: no completion unless it fails, so the
//     loop wakes for responses only. The response proves the send went
//     out whole (a server answers a request it has read, and with the
//     response comes the ACK that empties the socket's send queue, so the
//     next request is taken at once, inline, in the same
//     io_uring_enter); larger ones (bodies) and TLS's handshake records
//     wait for their completion before the connection sends again.
//   - A connection is dropped by cancelling what is in flight on its
//     slot and closing the slot, both without completions; the slot's
//     generation in every request's user_data tells the completions of
//     the old socket from the next one's.
//   - Timeouts and the open-loop schedule are the worker's, shared with
//     the epoll engine (maintain every 10 ms, dispatch by intended send
//     time), so the latencies mean the same in both.
type uringPoller struct {
	w     *worker
	ring  *uring.Ring
	bufs  *uring.BufRing
	rearm []*conn // connections whose multishot receive ended while they still read
}

// Requests' user_data: op, the connection's generation, its index.
const (
	opConnect = iota + 1
	opRecv
	opSend
	opOther // socket, cancel, close: seen only when they fail
)

// smallSend is the largest request sent without a completion.
const smallSend = 4096

// Buffers for receives: recvBufSize each (a page is touched per small
// response, so the memory used is the pages the responses filled), and
// enough of them for two completions per connection in flight.
const (
	recvBufSize = 16 << 10
	minBufs     = 64
	maxBufs     = 1 << 13
)

func userData(op int, c *conn) uint64 {
	return uint64(op)<<56 | uint64(c.gen&0xffffff)<<32 | uint64(uint32(c.idx))
}

func pow2(n int) int { return 1 << bits.Len(uint(max(n, 1)-1)) }

// uringOps are the operations the engine needs.
var uringOps = []uint8{uring.OpSocket, uring.OpConnect, uring.OpSend, uring.OpRecv, uring.OpClose, uring.OpAsyncCancel}

func newUringPoller(w *worker) (*uringPoller, error) {
	slots := len(w.conns)
	sq := uint32(min(max(pow2(4*slots), 64), 4096))
	ring, err := uring.New(sq, 4*sq)
	if err != nil {
		return nil, err
	}
	p := &uringPoller{w: w, ring: ring}
	if err := ring.Supports(uringOps...); err != nil {
		ring.Close()
		return nil, err
	}
	if err := ring.RegisterFiles(uint32(max(slots, 1))); err != nil {
		ring.Close()
		return nil, err
	}
	n := min(max(pow2(2*slots), minBufs), maxBufs)
	if p.bufs, err = ring.NewBufRing(0, n, recvBufSize); err != nil {
		ring.Close()
		return nil, err
	}
	return p, nil
}

// probeUring says whether this host gives the io_uring engine what it
// needs: io_uring itself (not disabled, not refused by a seccomp
// filter), SINGLE_ISSUER|DEFER_TASKRUN (6.1), the operations, fixed
// files and a buffer ring.
func probeUring() error {
	// A single-issuer ring takes io_uring_register from the thread that
	// made it alone (EEXIST from any other): keep this goroutine on one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ring, err := uring.New(8, 16)
	if err != nil {
		return uringRefused(err)
	}
	defer ring.Close()
	if err := ring.Supports(uringOps...); err != nil {
		return err
	}
	if err := ring.RegisterFiles(1); err != nil {
		return err
	}
	b, err := ring.NewBufRing(0, 1, 4096)
	if err != nil {
		return err
	}
	ring.Close()
	b.Free()
	return nil
}

// uringRefused says why io_uring_setup failed, in the words of what
// refuses it.
func uringRefused(err error) error {
	switch {
	case errors.Is(err, unix.EPERM):
		if b, _ := os.ReadFile("/proc/sys/kernel/io_uring_disabled"); len(b) > 0 && strings.TrimSpace(string(b)) != "0" {
			return fmt.Errorf("%w (kernel.io_uring_disabled=%s)", err, strings.TrimSpace(string(b)))
		}
		return fmt.Errorf("%w (a seccomp filter, as container runtimes' default profiles have)", err)
	case errors.Is(err, unix.ENOSYS):
		return fmt.Errorf("%w (a seccomp filter, or a kernel built without io_uring)", err)
	}
	return err
}

// close cancels what is in flight, closes every socket and then the
// ring, from this thread: the ring's only submitter, whose task work the
// completions of the cancelled receives are. Closing the ring with them
// armed leaves that to the kernel's teardown, which waits for this thread
// to run it, and a Go thread back in the scheduler's pool may not for
// seconds: the server saw the connections stay open.
func (p *uringPoller) close() {
	if s := p.ring.Get(); s != nil {
		s.PrepCancelAll()
		s.UserData = uint64(opOther) << 56
	}
	for _, c := range p.w.conns {
		if c.fd >= 0 {
			if s := p.ring.Get(); s != nil {
				s.PrepCloseFixed(uint32(c.fd))
				s.UserData = uint64(opOther) << 56
			}
			c.fd = -1
		}
	}
	// Submit, and run the completions until none is left (a few turns at
	// most; bounded, whatever happens).
	for range 8 {
		p.ring.Enter(0, -1)
		head, tail := p.ring.Ready()
		p.ring.Seen(tail)
		if head == tail && p.ring.Pending() == 0 {
			break
		}
	}
	p.ring.Close()
	p.bufs.Free()
}

// sqe returns a free submission slot; nil if the queue is full and could
// not be flushed.
func (p *uringPoller) sqe() *uring.SQE { return p.ring.Get() }

var errSQFull = errors.New("io_uring: submission queue full")

func (p *uringPoller) connect(c *conn) error {
	w := p.w
	slot := uint32(c.idx)
	eager := w.eager(c)
	need := 3
	if eager {
		need = 4
	}
	// Room for the whole chain at once: a chain split by a flush would
	// run its connect without its socket.
	if p.ring.Room() < uint32(need) {
		p.ring.Flush()
		if p.ring.Room() < uint32(need) {
			return errSQFull
		}
	}
	c.gen++
	s := p.sqe()
	s.PrepSocket(w.family, unix.SOCK_STREAM, 0, slot)
	s.Flags |= uring.SQEIOLink | uring.SQECQESkipSuccess
	s.UserData = userData(opOther, c)
	s = p.sqe()
	s.PrepConnect(slot, w.sa, w.salen)
	s.Flags |= uring.SQEIOLink
	s.UserData = userData(opConnect, c)
	if eager {
		s = p.sqe()
		s.PrepSend(slot, c.req, unix.MSG_WAITALL|unix.MSG_NOSIGNAL)
		s.Flags |= uring.SQEIOLink
		if len(c.req) <= smallSend {
			s.Flags |= uring.SQECQESkipSuccess
		} else {
			c.inflight = true
		}
		s.UserData = userData(opSend, c)
		c.eagerSent = true
	}
	s = p.sqe()
	s.PrepRecvMultishot(slot, p.bufs.Group)
	s.UserData = userData(opRecv, c)
	c.fd, c.recv = int(slot), true
	return nil
}

func (p *uringPoller) write(c *conn) {
	b := c.out[c.wrOff:]
	s := p.sqe()
	if s == nil {
		p.w.failReq(c, errWrite, errSQFull.Error())
		return
	}
	s.PrepSend(uint32(c.fd), b, unix.MSG_WAITALL|unix.MSG_NOSIGNAL)
	s.UserData = userData(opSend, c)
	if len(b) <= smallSend && (c.tls == nil || c.state == cWriting) {
		s.Flags |= uring.SQECQESkipSuccess
		c.wrOff = len(c.out)
		p.w.written(c)
		return
	}
	c.inflight = true
}

func (p *uringPoller) drop(c *conn) {
	slot := uint32(c.fd)
	switch {
	case c.inflight || c.state == cConnecting || c.eagerSent:
		// A connect or a send may be in flight too (a timeout, a
		// server that answered early): everything on the slot.
		if s := p.sqe(); s != nil {
			s.PrepCancelFixed(slot)
			s.Flags |= uring.SQECQESkipSuccess
			s.UserData = userData(opOther, c)
		}
	case c.recv:
		// The usual drop: only the receive is armed; cancelled by its
		// user_data, one lookup.
		if s := p.sqe(); s != nil {
			s.PrepCancel(userData(opRecv, c))
			s.Flags |= uring.SQECQESkipSuccess
			s.UserData = userData(opOther, c)
		}
	}
	if s := p.sqe(); s != nil {
		s.PrepCloseFixed(slot)
		s.Flags |= uring.SQECQESkipSuccess
		s.UserData = userData(opOther, c)
	}
	c.fd, c.recv, c.eagerSent = -1, false, false
	c.gen++
}

func (p *uringPoller) wait(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = -1 // only look
	}
	if err := p.ring.Enter(1, timeout); err != nil && !errors.Is(err, unix.EBUSY) && !errors.Is(err, unix.EAGAIN) {
		return err
	}
	now := p.w.now()
	head, tail := p.ring.Ready()
	for ; head != tail; head++ {
		p.handle(p.ring.CQE(head), now)
	}
	p.ring.Seen(head)
	p.bufs.Commit()
	for _, c := range p.rearm {
		if c.fd >= 0 && !c.recv && c.state != cClosed {
			if s := p.sqe(); s != nil {
				s.PrepRecvMultishot(uint32(c.fd), p.bufs.Group)
				s.UserData = userData(opRecv, c)
				c.recv = true
			}
		}
	}
	p.rearm = p.rearm[:0]
	return nil
}

func (p *uringPoller) handle(cqe *uring.CQE, now time.Duration) {
	w := p.w
	ud := cqe.UserData
	op := int(ud >> 56)
	c := w.conns[uint32(ud)]
	var buf []byte
	if cqe.Flags&uring.CQEFBuffer != 0 {
		bid := cqe.BufferID()
		defer p.bufs.Put(bid) // once parsed; even a stale socket's
		if cqe.Res > 0 {
			buf = p.bufs.Bytes(bid, int(cqe.Res))
		}
	}
	if uint32(ud>>32)&0xffffff != c.gen&0xffffff || c.fd < 0 {
		return // a closed socket's
	}
	switch op {
	case opConnect:
		if cqe.Res < 0 {
			err := unix.Errno(-cqe.Res)
			w.drop(c)
			w.connectFailed(c, err)
			return
		}
		if c.eagerSent {
			c.eagerSent = false
			w.sentWithConnect(c, now)
			return
		}
		w.established(c, now)
	case opSend:
		if cqe.Res < 0 {
			w.failReq(c, errWrite, connectCause(unix.Errno(-cqe.Res)))
			return
		}
		c.inflight = false
		c.wrOff += int(cqe.Res)
		if c.wrOff < len(c.out) { // not with MSG_WAITALL, but if it came short
			p.write(c)
			return
		}
		w.written(c)
	case opRecv:
		more := cqe.Flags&uring.CQEFMore != 0
		if !more {
			c.recv = false
		}
		switch {
		case cqe.Res > 0:
			w.received(c, buf, now)
			if !more && c.fd >= 0 && c.gen&0xffffff == uint32(ud>>32)&0xffffff {
				p.rearm = append(p.rearm, c)
			}
		case cqe.Res == 0:
			w.eof(c, now)
		case cqe.Res == -int32(unix.ENOBUFS):
			// Every buffer was in use: the loop gives them back below,
			// and the receive is armed again.
			p.rearm = append(p.rearm, c)
		case cqe.Res == -int32(unix.ECANCELED):
		default:
			err := unix.Errno(-cqe.Res)
			if c.state == cHandshake {
				w.handshakeFailed(c, err)
				return
			}
			if c.state == cIdle || c.state == cDelayed {
				w.closedIdle(c)
				return
			}
			w.failReq(c, errRead, connectCause(err))
		}
	case opOther:
		// A socket that could not be made (its linked connect is
		// cancelled without a completion): the connect failed.
		if cqe.Res < 0 && c.state == cConnecting {
			err := unix.Errno(-cqe.Res)
			w.drop(c)
			w.connectFailed(c, err)
		}
	}
}
