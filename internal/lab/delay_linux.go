package lab

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// Link is what a delay element does to the frames it forwards, the same
// each way: this kernel has no netem (nor fq, nor etf to pace frames by
// their departure time), so the lab delays frames in user space.
type Link struct {
	// Delay is the one-way delay: a round trip takes twice as long.
	Delay time.Duration
	// Rate, when not 0, is the link's rate each way in bytes a second:
	// frames leave one after the other at it, and wait for their turn.
	Rate uint64
	// Queue bounds the bytes held each way, frames in flight and
	// waiting for the rate alike; a frame that does not fit is dropped
	// (a router's tail drop). Default: DefaultDelayQueue.
	Queue int
}

// DefaultDelayQueue is a delay element's queue each way by default: 25 ms
// at 10 Gbit/s.
const DefaultDelayQueue = 32 << 20

// maxFrame is the largest frame read: a GSO frame of 64 KiB with its
// link header and the virtio header before it. A larger one (BIG TCP) is
// dropped and counted.
const maxFrame = 65536 + 256

// virtioNetHdrLen is struct virtio_net_hdr: what PACKET_VNET_HDR puts
// before each frame, so that a GSO frame and its unfinished checksum
// cross the element as they came (veth sends TCP's 64 KiB segments and
// leaves checksums to the receiver).
const virtioNetHdrLen = 10

// Delay forwards every frame between two interfaces of one namespace
// after Link's delay, through an AF_PACKET socket on each: a bridge that
// holds frames. Close stops it; its goroutines end with the sockets.
type Delay struct {
	link  Link
	ends  [2]*packetEnd
	dirs  [2]*delayDir
	wg    sync.WaitGroup
	once  sync.Once
	errMu sync.Mutex
	err   error
}

// packetEnd is one interface's AF_PACKET socket, read and written
// through the runtime's poller so that closing it wakes its reader.
type packetEnd struct {
	name string
	f    *os.File
	rc   syscall.RawConn
}

// DelayStats are what one direction of a delay element forwarded and
// dropped.
type DelayStats struct {
	Frames, Bytes uint64
	// Dropped counts frames the queue had no room for, Truncated those
	// larger than maxFrame, SendErrors those the kernel refused to send.
	Dropped, Truncated, SendErrors uint64
	// MaxQueued is the most bytes held at once.
	MaxQueued uint64
}

// StartDelay starts a delay element between interfaces a and b of
// namespace ns (set up, without addresses: its kernel stack takes no
// part). It fails, leaving nothing open, when a socket cannot be made.
func StartDelay(ns netns.NS, a, b string, l Link) (*Delay, error) {
	if l.Delay < 0 {
		return nil, fmt.Errorf("delay %v: must not be negative", l.Delay)
	}
	if l.Queue <= 0 {
		l.Queue = DefaultDelayQueue
	}
	if l.Queue < 2*maxFrame {
		return nil, fmt.Errorf("delay queue %d bytes: must hold two frames of %d", l.Queue, maxFrame)
	}
	d := &Delay{link: l}
	err := ns.Do(func() error {
		for i, name := range []string{a, b} {
			e, err := openPacket(name)
			if err != nil {
				return err
			}
			d.ends[i] = e
		}
		return nil
	})
	if err != nil {
		d.closeEnds()
		return nil, err
	}
	for i := range 2 {
		dir := newDelayDir(d, d.ends[i], d.ends[1-i])
		d.dirs[i] = dir
		d.wg.Add(2)
		go dir.read()
		go dir.write()
	}
	return d, nil
}

// openPacket opens an AF_PACKET socket bound to interface name of the
// calling thread's namespace: every frame it receives, none it sends
// (PACKET_IGNORE_OUTGOING), with a virtio header, sending past the
// qdisc.
func openPacket(name string) (*packetEnd, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("delay element: %w", err)
	}
	proto := int(htons(unix.ETH_P_ALL))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, proto)
	if err != nil {
		return nil, fmt.Errorf("delay element: AF_PACKET socket on %s: %w", name, err)
	}
	set := func(opt, v int) error { return unix.SetsockoptInt(fd, unix.SOL_PACKET, opt, v) }
	for _, o := range []struct {
		name   string
		opt, v int
	}{{"PACKET_VNET_HDR", unix.PACKET_VNET_HDR, 1}, {"PACKET_IGNORE_OUTGOING", unix.PACKET_IGNORE_OUTGOING, 1}, {"PACKET_QDISC_BYPASS", unix.PACKET_QDISC_BYPASS, 1}} {
		if err := set(o.opt, o.v); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("delay element: %s on %s: %w", o.name, name, err)
		}
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 8<<20)
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("delay element: bind to %s: %w", name, err)
	}
	// Frames addressed to the other side's MAC reach a veth as
	// PACKET_OTHERHOST, which a packet socket takes anyway; promiscuous
	// mode makes sure of it on any other kind of link.
	mr := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_PROMISC}
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("delay element: promiscuous %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), "packet "+name)
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	return &packetEnd{name: name, f: f, rc: rc}, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Close stops the element and waits for its goroutines. It returns the
// first error that stopped it before, if any.
func (d *Delay) Close() error {
	d.once.Do(func() {
		for _, dir := range d.dirs {
			if dir != nil {
				dir.stop()
			}
		}
		d.closeEnds()
		d.wg.Wait()
	})
	d.errMu.Lock()
	defer d.errMu.Unlock()
	return d.err
}

func (d *Delay) closeEnds() {
	for _, e := range d.ends {
		if e != nil {
			e.f.Close()
		}
	}
}

// failed keeps the first error that stopped a direction.
func (d *Delay) failed(err error) {
	d.errMu.Lock()
	defer d.errMu.Unlock()
	if d.err == nil {
		d.err = err
	}
}

// Stats are what each direction did: from a to b, and from b to a.
func (d *Delay) Stats() (ab, ba DelayStats) { return d.dirs[0].stats(), d.dirs[1].stats() }

// delayDir is one direction: frames read from in, held in a ring of
// bytes until due, written to out in the order they came.
type delayDir struct {
	d       *Delay
	in, out *packetEnd

	mu      sync.Mutex
	cond    *sync.Cond
	buf     []byte
	frames  []frame // a ring: head, n
	head, n int
	// r is where the oldest held frame begins, w where the next is
	// written; queued the bytes held; free is when the link is next
	// free at its rate.
	r, w    int
	queued  int
	free    time.Time
	stopped bool

	fwd, bytes, dropped, truncated, sendErrs, maxQueued atomic.Uint64
}

// frame is one held frame: where it is in the ring, how long, when due.
type frame struct {
	off, n int
	due    time.Time
}

// maxHeld bounds the frames held each way, whatever their size.
const maxHeld = 1 << 16

func newDelayDir(d *Delay, in, out *packetEnd) *delayDir {
	dd := &delayDir{d: d, in: in, out: out, buf: make([]byte, d.link.Queue), frames: make([]frame, maxHeld)}
	dd.cond = sync.NewCond(&dd.mu)
	return dd
}

func (dd *delayDir) stop() {
	dd.mu.Lock()
	dd.stopped = true
	dd.mu.Unlock()
	dd.cond.Broadcast()
}

func (dd *delayDir) stats() DelayStats {
	return DelayStats{Frames: dd.fwd.Load(), Bytes: dd.bytes.Load(), Dropped: dd.dropped.Load(), Truncated: dd.truncated.Load(),
		SendErrors: dd.sendErrs.Load(), MaxQueued: dd.maxQueued.Load()}
}

// room returns where a frame of up to maxFrame bytes can be read into
// the ring, or -1 when it is full. The ring's free space is after w up
// to its end or to r, and before r once w wrapped: r == w means empty.
func (dd *delayDir) room() int {
	if dd.n == 0 {
		dd.r, dd.w = 0, 0
	}
	if dd.n >= len(dd.frames) {
		return -1
	}
	if dd.w >= dd.r {
		if len(dd.buf)-dd.w >= maxFrame {
			return dd.w
		}
		if dd.r > maxFrame {
			return 0 // wrap: the end's few bytes stay unused
		}
		return -1
	}
	if dd.r-dd.w > maxFrame {
		return dd.w
	}
	return -1
}

// read receives frames and queues them with their due time; a frame
// without room is read into scratch and dropped.
func (dd *delayDir) read() {
	defer dd.d.wg.Done()
	scratch := make([]byte, maxFrame)
	for {
		dd.mu.Lock()
		off := dd.room()
		dd.mu.Unlock()
		into := scratch
		if off >= 0 {
			into = dd.buf[off : off+maxFrame]
		}
		var n int
		var rerr error
		err := dd.in.rc.Read(func(fd uintptr) bool {
			n, _, rerr = unix.Recvfrom(int(fd), into, unix.MSG_TRUNC)
			return !errors.Is(rerr, unix.EAGAIN)
		})
		if err != nil {
			return // closed
		}
		if rerr != nil {
			if errors.Is(rerr, unix.EINTR) || errors.Is(rerr, unix.ENETDOWN) {
				continue
			}
			dd.d.failed(fmt.Errorf("delay element: read from %s: %w", dd.in.name, rerr))
			return
		}
		now := time.Now()
		switch {
		case n > maxFrame:
			dd.truncated.Add(1)
			continue
		case off < 0:
			dd.dropped.Add(1)
			continue
		case n <= virtioNetHdrLen:
			continue
		}
		wire := n - virtioNetHdrLen
		dd.mu.Lock()
		if dd.queued+n > len(dd.buf)-maxFrame {
			// Held bytes past the queue's bound: tail drop.
			dd.mu.Unlock()
			dd.dropped.Add(1)
			continue
		}
		due := now
		if rate := dd.d.link.Rate; rate > 0 {
			// At the link's rate, after the frames before it.
			start := now
			if dd.free.After(now) {
				start = dd.free
			}
			dd.free = start.Add(time.Duration(float64(wire) / float64(rate) * float64(time.Second)))
			due = dd.free
		}
		due = due.Add(dd.d.link.Delay)
		dd.frames[(dd.head+dd.n)%len(dd.frames)] = frame{off: off, n: n, due: due}
		dd.n++
		dd.w = off + n
		dd.queued += n
		if q := uint64(dd.queued); q > dd.maxQueued.Load() {
			dd.maxQueued.Store(q)
		}
		dd.mu.Unlock()
		dd.cond.Signal()
	}
}

// early is how soon before its due time a frame is sent: the timer
// wakes within about a millisecond.
const early = 100 * time.Microsecond

// write sends each held frame when it is due, in order.
func (dd *delayDir) write() {
	defer dd.d.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		dd.mu.Lock()
		for dd.n == 0 && !dd.stopped {
			dd.cond.Wait()
		}
		if dd.stopped {
			dd.mu.Unlock()
			return
		}
		f := dd.frames[dd.head]
		dd.mu.Unlock()
		if wait := time.Until(f.due); wait > early {
			timer.Reset(wait)
			<-timer.C
		}
		var werr error
		err := dd.out.rc.Write(func(fd uintptr) bool {
			werr = unix.Sendto(int(fd), dd.buf[f.off:f.off+f.n], 0, nil)
			return !errors.Is(werr, unix.EAGAIN)
		})
		if err != nil {
			return // closed
		}
		if werr != nil {
			dd.sendErrs.Add(1)
		} else {
			dd.fwd.Add(1)
			dd.bytes.Add(uint64(f.n - virtioNetHdrLen))
		}
		dd.mu.Lock()
		dd.head = (dd.head + 1) % len(dd.frames)
		dd.n--
		dd.queued -= f.n
		if dd.n > 0 {
			dd.r = dd.frames[dd.head].off
		} else {
			dd.r = dd.w
		}
		dd.mu.Unlock()
	}
}
