package uring

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Setup flags (IORING_SETUP_*).
const (
	setupCQSize        = 1 << 3
	setupSubmitAll     = 1 << 7
	setupSingleIssuer  = 1 << 12
	setupDeferTaskrun  = 1 << 13
	setupNoSQArray     = 1 << 16
	offSQRing          = 0
	offSQEs            = 0x10000000
	enterGetEvents     = 1 << 0
	enterExtArg        = 1 << 3
	enterRegisteredFd  = 1 << 4
	registerProbe      = 8
	registerFiles2     = 13
	registerRingFds    = 20
	registerPbufRing   = 22
	rsrcRegisterSparse = 1 << 0
	probeOpSupported   = 1 << 0
)

// Features (IORING_FEAT_*) the engine relies on.
const (
	FeatSingleMmap = 1 << 0
	FeatNoDrop     = 1 << 1
	FeatFastPoll   = 1 << 5
	FeatExtArg     = 1 << 8
	FeatCQESkip    = 1 << 11
	FeatLinkedFile = 1 << 12
	needFeatures   = FeatSingleMmap | FeatNoDrop | FeatFastPoll | FeatExtArg | FeatCQESkip | FeatLinkedFile
)

// Opcodes (enum io_uring_op) the engine uses.
const (
	OpNop         = 0
	OpAsyncCancel = 14
	OpConnect     = 16
	OpClose       = 19
	OpSend        = 26
	OpRecv        = 27
	OpShutdown    = 34
	OpSocket      = 45
)

// SQE flags (IOSQE_*).
const (
	SQEFixedFile      = 1 << 0
	SQEIOLink         = 1 << 2
	SQEBufferSelect   = 1 << 5
	SQECQESkipSuccess = 1 << 6
)

// CQE flags (IORING_CQE_F_*), receive and cancel flags.
const (
	CQEFBuffer      = 1 << 0
	CQEFMore        = 1 << 1
	cqeBufferShift  = 16
	recvMultishot   = 1 << 1
	cancelAll       = 1 << 0
	cancelFd        = 1 << 1
	cancelAny       = 1 << 2
	cancelFdFixed   = 1 << 3
	fileIndexOffset = 1 // file_index is the fixed slot + 1; 0 means a normal fd
)

// SQE is struct io_uring_sqe (64 bytes).
type SQE struct {
	Opcode      uint8
	Flags       uint8
	Ioprio      uint16
	Fd          int32
	Off         uint64
	Addr        uint64
	Len         uint32
	OpFlags     uint32
	UserData    uint64
	BufIndex    uint16 // buf_index, or buf_group with IOSQE_BUFFER_SELECT
	Personality uint16
	FileIndex   uint32 // file_index (or splice_fd_in)
	Addr3       uint64
	_           uint64
}

// CQE is struct io_uring_cqe (16 bytes).
type CQE struct {
	UserData uint64
	Res      int32
	Flags    uint32
}

// BufferID is the provided buffer a receive completion filled.
func (c *CQE) BufferID() uint16 { return uint16(c.Flags >> cqeBufferShift) }

type sqringOffsets struct {
	head, tail, ringMask, ringEntries, flags, dropped, array, resv1 uint32
	userAddr                                                        uint64
}

type cqringOffsets struct {
	head, tail, ringMask, ringEntries, overflow, cqes, flags, resv1 uint32
	userAddr                                                        uint64
}

type params struct {
	sqEntries, cqEntries, flags, sqThreadCPU, sqThreadIdle, features, wqFd uint32
	resv                                                                   [3]uint32
	sqOff                                                                  sqringOffsets
	cqOff                                                                  cqringOffsets
}

// getEventsArg is struct io_uring_getevents_arg.
type getEventsArg struct {
	sigmask     uint64
	sigmaskSz   uint32
	minWaitUsec uint32
	ts          uint64
}

// Ring is one io_uring instance, used by one thread only (the ring is
// set up SINGLE_ISSUER, so the kernel refuses any other).
type Ring struct {
	fd       int
	enterFd  uintptr // the registered ring's index, or fd
	enterReg uintptr // enterRegisteredFd when enterFd is an index
	features uint32
	ringMem  []byte
	sqeMem   []byte
	sqHead   *uint32
	sqTail   *uint32
	sqMask   uint32
	sqes     []SQE
	tail     uint32 // SQEs handed out, published at Submit
	cqHead   *uint32
	cqTail   *uint32
	cqMask   uint32
	cqes     []CQE
	arg      getEventsArg
	ts       unix.Timespec
}

// ErrUnsupported marks a kernel without what the engine needs: io_uring
// itself, or the setup flags, features and operations listed in the
// error.
var ErrUnsupported = errors.New("io_uring lacks what the engine needs")

// New sets up a ring of at least sqEntries submissions and cqEntries
// completions, single-issuer with task work deferred to io_uring_enter:
// completions run only when the loop asks for them, never by
// interrupting it. It must be called on the thread that uses the ring,
// locked to it.
func New(sqEntries, cqEntries uint32) (*Ring, error) {
	p := params{flags: setupSingleIssuer | setupDeferTaskrun | setupSubmitAll | setupCQSize | setupNoSQArray, cqEntries: cqEntries}
	fd, err := setup(sqEntries, &p)
	if errors.Is(err, unix.EINVAL) { // before 6.6: with the SQ index array
		p = params{flags: setupSingleIssuer | setupDeferTaskrun | setupSubmitAll | setupCQSize, cqEntries: cqEntries}
		fd, err = setup(sqEntries, &p)
	}
	if err != nil {
		if errors.Is(err, unix.EINVAL) {
			return nil, fmt.Errorf("%w: io_uring_setup refuses SINGLE_ISSUER|DEFER_TASKRUN (Linux 6.1 or later): %v", ErrUnsupported, err)
		}
		return nil, fmt.Errorf("io_uring_setup: %w", err)
	}
	r := &Ring{fd: fd, enterFd: uintptr(fd), features: p.features}
	if missing := needFeatures &^ p.features; missing != 0 {
		r.Close()
		return nil, fmt.Errorf("%w: features %#x missing (have %#x)", ErrUnsupported, missing, p.features)
	}
	ringSize := uintptr(p.cqOff.cqes) + uintptr(p.cqEntries)*unsafe.Sizeof(CQE{})
	if p.flags&setupNoSQArray == 0 {
		ringSize = max(ringSize, uintptr(p.sqOff.array)+uintptr(p.sqEntries)*4)
	}
	if r.ringMem, err = unix.Mmap(fd, offSQRing, int(ringSize), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: mmap rings: %w", err)
	}
	sqeSize := int(p.sqEntries) * int(unsafe.Sizeof(SQE{}))
	if r.sqeMem, err = unix.Mmap(fd, offSQEs, sqeSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE); err != nil {
		r.Close()
		return nil, fmt.Errorf("io_uring: mmap SQEs: %w", err)
	}
	base := unsafe.Pointer(&r.ringMem[0])
	r.sqHead = (*uint32)(unsafe.Add(base, p.sqOff.head))
	r.sqTail = (*uint32)(unsafe.Add(base, p.sqOff.tail))
	r.sqMask = *(*uint32)(unsafe.Add(base, p.sqOff.ringMask))
	r.sqes = unsafe.Slice((*SQE)(unsafe.Pointer(&r.sqeMem[0])), p.sqEntries)
	if p.flags&setupNoSQArray == 0 { // the identity: SQE i is slot i
		arr := unsafe.Slice((*uint32)(unsafe.Add(base, p.sqOff.array)), p.sqEntries)
		for i := range arr {
			arr[i] = uint32(i)
		}
	}
	r.cqHead = (*uint32)(unsafe.Add(base, p.cqOff.head))
	r.cqTail = (*uint32)(unsafe.Add(base, p.cqOff.tail))
	r.cqMask = *(*uint32)(unsafe.Add(base, p.cqOff.ringMask))
	r.cqes = unsafe.Slice((*CQE)(unsafe.Add(base, p.cqOff.cqes)), p.cqEntries)
	r.tail = atomic.LoadUint32(r.sqTail)
	// A registered ring fd spares io_uring_enter the descriptor lookup
	// (and its reference count, the table being shared by Go's threads).
	upd := struct {
		offset, resv uint32
		data         uint64
	}{offset: ^uint32(0), data: uint64(fd)}
	if n, err := register(fd, registerRingFds, unsafe.Pointer(&upd), 1); err == nil && n == 1 {
		r.enterFd, r.enterReg = uintptr(upd.offset), enterRegisteredFd
	}
	r.arg.ts = uint64(uintptr(unsafe.Pointer(&r.ts)))
	return r, nil
}

func setup(entries uint32, p *params) (int, error) {
	fd, _, e := unix.RawSyscall(unix.SYS_IO_URING_SETUP, uintptr(entries), uintptr(unsafe.Pointer(p)), 0)
	if e != 0 {
		return -1, e
	}
	return int(fd), nil
}

func register(fd int, op uint32, arg unsafe.Pointer, n uint32) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_IO_URING_REGISTER, uintptr(fd), uintptr(op), uintptr(arg), uintptr(n), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// Features is the kernel's IORING_FEAT_* word for this ring.
func (r *Ring) Features() uint32 { return r.features }

// Close unmaps the rings and closes the ring; the kernel cancels what is
// still in flight and closes the registered files.
func (r *Ring) Close() {
	if r.sqeMem != nil {
		unix.Munmap(r.sqeMem)
		r.sqeMem = nil
	}
	if r.ringMem != nil {
		unix.Munmap(r.ringMem)
		r.ringMem = nil
	}
	if r.fd >= 0 {
		unix.Close(r.fd)
		r.fd = -1
	}
}

// Supports reports which of ops this kernel's io_uring implements.
func (r *Ring) Supports(ops ...uint8) error {
	const n = 256
	var buf [16 + 8*n]byte
	if _, err := register(r.fd, registerProbe, unsafe.Pointer(&buf[0]), n); err != nil {
		return fmt.Errorf("%w: probe: %v", ErrUnsupported, err)
	}
	last := buf[0]
	for _, op := range ops {
		if op > last || *(*uint16)(unsafe.Pointer(&buf[16+8*int(op)+2]))&probeOpSupported == 0 {
			return fmt.Errorf("%w: operation %d not supported", ErrUnsupported, op)
		}
	}
	return nil
}

// RegisterFiles makes a table of n empty fixed-file slots, which
// sockets made by OpSocket go into (see PrepSocket).
func (r *Ring) RegisterFiles(n uint32) error {
	reg := struct {
		nr, flags  uint32
		resv2      uint64
		data, tags uint64
	}{nr: n, flags: rsrcRegisterSparse}
	if _, err := register(r.fd, registerFiles2, unsafe.Pointer(&reg), uint32(unsafe.Sizeof(reg))); err != nil {
		return fmt.Errorf("io_uring: register %d files: %w", n, err)
	}
	return nil
}

// Get returns the next free SQE, zeroed, or nil when the submission
// queue is full and could not be flushed.
func (r *Ring) Get() *SQE {
	if r.tail-atomic.LoadUint32(r.sqHead) > r.sqMask {
		if err := r.Flush(); err != nil || r.tail-atomic.LoadUint32(r.sqHead) > r.sqMask {
			return nil
		}
	}
	s := &r.sqes[r.tail&r.sqMask]
	*s = SQE{}
	r.tail++
	return s
}

// Pending is the number of SQEs not yet submitted.
func (r *Ring) Pending() uint32 { return r.tail - atomic.LoadUint32(r.sqHead) }

// Room is the number of SQEs Get can hand out before the queue is
// full; Flush submits what is pending to make more.
func (r *Ring) Room() uint32 { return r.sqMask + 1 - (r.tail - atomic.LoadUint32(r.sqHead)) }

// Flush submits what is pending without waiting.
func (r *Ring) Flush() error { return r.Enter(0, -1) }

// Enter submits what is pending and, for wait > 0, waits until that many
// completions are ready or timeout passes (timeout < 0: no wait at all;
// 0: no limit). Completions of deferred task work (receives that data
// arrived for) are run here, on this thread. EINTR and ETIME are not
// errors: the caller just looks at the completions.
func (r *Ring) Enter(wait uint32, timeout time.Duration) error {
	atomic.StoreUint32(r.sqTail, r.tail)
	submit := r.tail - atomic.LoadUint32(r.sqHead)
	flags := uintptr(enterGetEvents | enterExtArg)
	arg := uintptr(unsafe.Pointer(&r.arg))
	if timeout < 0 {
		wait = 0
	}
	if timeout > 0 {
		r.ts = unix.NsecToTimespec(int64(timeout))
		r.arg.ts = uint64(uintptr(unsafe.Pointer(&r.ts)))
	} else {
		r.arg.ts = 0
	}
	_, _, e := unix.RawSyscall6(unix.SYS_IO_URING_ENTER, r.enterFd, uintptr(submit), uintptr(wait), flags|r.enterReg, arg, unsafe.Sizeof(r.arg))
	switch e {
	case 0, unix.EINTR, unix.ETIME:
		return nil
	}
	return e
}

// Ready returns the completions ready: from head up to tail, each at
// CQE(i); Seen(tail) hands their slots back to the kernel.
func (r *Ring) Ready() (head, tail uint32) {
	return *r.cqHead, atomic.LoadUint32(r.cqTail)
}

// CQE is the completion at position i (between Ready's head and tail).
func (r *Ring) CQE(i uint32) *CQE { return &r.cqes[i&r.cqMask] }

// Seen hands the completions before head back to the kernel.
func (r *Ring) Seen(head uint32) { atomic.StoreUint32(r.cqHead, head) }

// PrepSocket makes a socket in fixed-file slot (not a descriptor).
func (s *SQE) PrepSocket(domain, typ, proto int, slot uint32) {
	s.Opcode, s.Fd, s.Off, s.Len, s.FileIndex = OpSocket, int32(domain), uint64(typ), uint32(proto), slot+fileIndexOffset
}

// PrepConnect connects the socket in fixed slot to the sockaddr at sa.
func (s *SQE) PrepConnect(slot uint32, sa unsafe.Pointer, salen uintptr) {
	s.Opcode, s.Flags, s.Fd, s.Addr, s.Off = OpConnect, SQEFixedFile, int32(slot), uint64(uintptr(sa)), uint64(salen)
}

// PrepSend sends b on the socket in fixed slot. The bytes must stay
// untouched until the send completes.
func (s *SQE) PrepSend(slot uint32, b []byte, msgFlags uint32) {
	s.Opcode, s.Flags, s.Fd, s.Addr, s.Len, s.OpFlags = OpSend, SQEFixedFile, int32(slot), uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b)))), uint32(len(b)), msgFlags
}

// PrepRecvMultishot receives on the socket in fixed slot into buffers of
// group bgid, one completion per receive (with IORING_CQE_F_MORE while
// it stays armed), until end of stream, an error or a cancel.
func (s *SQE) PrepRecvMultishot(slot uint32, bgid uint16) {
	s.Opcode, s.Flags, s.Ioprio, s.Fd, s.BufIndex = OpRecv, SQEFixedFile|SQEBufferSelect, recvMultishot, int32(slot), bgid
}

// PrepCancelFixed cancels every request in flight on fixed slot.
func (s *SQE) PrepCancelFixed(slot uint32) {
	s.Opcode, s.Fd, s.OpFlags = OpAsyncCancel, int32(slot), cancelAll|cancelFd|cancelFdFixed
}

// PrepCancel cancels the request in flight whose user_data is ud: a
// lookup in one bucket of the kernel's cancel table, where PrepCancelFixed
// walks them all.
func (s *SQE) PrepCancel(ud uint64) {
	s.Opcode, s.Fd, s.Addr = OpAsyncCancel, -1, ud
}

// PrepCancelAll cancels every request in flight on the ring.
func (s *SQE) PrepCancelAll() {
	s.Opcode, s.Fd, s.OpFlags = OpAsyncCancel, -1, cancelAll|cancelAny
}

// PrepCloseFixed empties fixed slot; the socket closes once no request
// holds it.
func (s *SQE) PrepCloseFixed(slot uint32) {
	s.Opcode, s.FileIndex = OpClose, slot+fileIndexOffset
}

// BufRing is a provided-buffer ring: buffers the kernel picks for
// receives, handed back by the loop once it has parsed them.
//
// Each buffer is whole for one receive (not IOU_PBUF_RING_INC, 6.12's
// incremental consumption, which packs small answers one after the
// other: measured with 1000 keep-alive connections, no less CPU a
// request, and twice the memory, since every page of every buffer gets
// filled where a small answer touches only a buffer's first).
type BufRing struct {
	ring  []byte // entries of struct io_uring_buf; the tail in the first's resv
	bufs  []byte
	size  int
	mask  uint16
	tail  uint16
	Group uint16
}

// NewBufRing registers a ring of entries (a power of 2, at most 32768)
// buffers of size bytes as group bgid, all given to the kernel. Both
// live outside Go's heap (anonymous mappings), where the kernel may
// write at any time.
func (r *Ring) NewBufRing(bgid uint16, entries, size int) (*BufRing, error) {
	if entries <= 0 || entries > 1<<15 || entries&(entries-1) != 0 {
		return nil, fmt.Errorf("io_uring: %d buffers: want a power of 2 up to 32768", entries)
	}
	ring, err := unix.Mmap(-1, 0, entries*16, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil, fmt.Errorf("io_uring: buffer ring: %w", err)
	}
	bufs, err := unix.Mmap(-1, 0, entries*size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		unix.Munmap(ring)
		return nil, fmt.Errorf("io_uring: buffers: %w", err)
	}
	reg := struct {
		ringAddr    uint64
		ringEntries uint32
		bgid, flags uint16
		resv        [3]uint64
	}{ringAddr: uint64(uintptr(unsafe.Pointer(&ring[0]))), ringEntries: uint32(entries), bgid: bgid}
	if _, err := register(r.fd, registerPbufRing, unsafe.Pointer(&reg), 1); err != nil {
		unix.Munmap(ring)
		unix.Munmap(bufs)
		return nil, fmt.Errorf("io_uring: register buffer ring: %w", err)
	}
	b := &BufRing{ring: ring, bufs: bufs, size: size, mask: uint16(entries - 1), Group: bgid}
	for i := range entries {
		b.Put(uint16(i))
	}
	b.Commit()
	return b, nil
}

// Bytes is buffer bid's first n bytes.
func (b *BufRing) Bytes(bid uint16, n int) []byte {
	off := int(bid) * b.size
	return b.bufs[off : off+n : off+b.size]
}

// Put gives buffer bid back to the kernel, from the next Commit on.
func (b *BufRing) Put(bid uint16) {
	e := unsafe.Pointer(&b.ring[int(b.tail&b.mask)*16])
	*(*uint64)(e) = uint64(uintptr(unsafe.Pointer(&b.bufs[int(bid)*b.size])))
	*(*uint32)(unsafe.Add(e, 8)) = uint32(b.size)
	*(*uint16)(unsafe.Add(e, 12)) = bid
	b.tail++
}

// Commit publishes the buffers Put since the last Commit. The tail is
// the 16 bits after entry 0's buffer ID; sync/atomic has no 16-bit
// store, so both go out in one 32-bit one (the kernel only reads them),
// which also keeps the entries' stores before it.
func (b *BufRing) Commit() {
	w := (*uint32)(unsafe.Pointer(&b.ring[12]))
	atomic.StoreUint32(w, uint32(b.tail)<<16|*w&0xffff)
}

// Free unmaps the ring's memory; call it after the Ring is closed.
func (b *BufRing) Free() {
	unix.Munmap(b.ring)
	unix.Munmap(b.bufs)
}
