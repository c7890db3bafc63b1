package uring

import (
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestLayout: the structures are the kernel's, byte for byte.
func TestLayout(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uintptr
	}{
		{"io_uring_sqe", unsafe.Sizeof(SQE{}), 64},
		{"io_uring_cqe", unsafe.Sizeof(CQE{}), 16},
		{"io_uring_params", unsafe.Sizeof(params{}), 120},
		{"io_uring_getevents_arg", unsafe.Sizeof(getEventsArg{}), 24},
		{"sqe.user_data", unsafe.Offsetof(SQE{}.UserData), 32},
		{"sqe.buf_index", unsafe.Offsetof(SQE{}.BufIndex), 40},
		{"sqe.file_index", unsafe.Offsetof(SQE{}.FileIndex), 44},
	} {
		if c.got != c.want {
			t.Errorf("%s: %d, want %d", c.name, c.got, c.want)
		}
	}
}

// newRing sets up a ring on the calling thread, locked to it, or skips
// where the kernel refuses io_uring.
func newRing(t *testing.T) *Ring {
	t.Helper()
	runtime.LockOSThread()
	t.Cleanup(runtime.UnlockOSThread)
	r, err := New(64, 256)
	if err != nil {
		t.Skipf("no io_uring here: %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

// wait enters until a completion is ready, for up to 5 s.
func wait(t *testing.T, r *Ring) *CQE {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if h, tl := r.Ready(); h != tl {
			c := *r.CQE(h)
			r.Seen(h + 1)
			return &c
		}
		if err := r.Enter(1, 100*time.Millisecond); err != nil {
			t.Fatalf("enter: %v", err)
		}
	}
	t.Fatal("no completion in 5 s")
	return nil
}

// TestSocketConnectSendRecv: a socket made in a fixed slot, connected,
// a send and a multishot receive into provided buffers that stays
// armed, then a cancel (of everything on the slot, or of the receive by
// its user_data) and a close.
func TestSocketConnectSendRecv(t *testing.T) {
	for _, byUserData := range []bool{false, true} {
		t.Run(map[bool]string{false: "cancel-fixed", true: "cancel-user-data"}[byUserData], func(t *testing.T) {
			socketConnectSendRecv(t, byUserData)
		})
	}
}

func socketConnectSendRecv(t *testing.T, byUserData bool) {
	r := newRing(t)
	if err := r.Supports(OpSocket, OpConnect, OpSend, OpRecv, OpClose, OpAsyncCancel); err != nil {
		t.Skip(err)
	}
	if err := r.RegisterFiles(4); err != nil {
		t.Fatal(err)
	}
	br, err := r.NewBufRing(1, 8, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer br.Free()
	defer r.Close() // before the buffers are unmapped

	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peer := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			peer <- c
		}
		close(peer)
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	sa.Port = uint16(port>>8) | uint16(port&0xff)<<8

	const slot = 2
	s := r.Get()
	s.PrepSocket(unix.AF_INET, unix.SOCK_STREAM, 0, slot)
	s.Flags |= SQEIOLink | SQECQESkipSuccess
	s = r.Get()
	s.PrepConnect(slot, unsafe.Pointer(sa), unsafe.Sizeof(*sa))
	s.Flags |= SQEIOLink
	s.UserData = 1
	s = r.Get()
	s.PrepRecvMultishot(slot, br.Group)
	s.UserData = 2
	if c := wait(t, r); c.UserData != 1 || c.Res != 0 {
		t.Fatalf("connect: %+v", c)
	}
	srv := <-peer
	defer srv.Close()

	msg := []byte("GET / HTTP/1.1\r\n\r\n")
	s = r.Get()
	s.PrepSend(slot, msg, unix.MSG_WAITALL)
	s.UserData = 3
	if c := wait(t, r); c.UserData != 3 || int(c.Res) != len(msg) {
		t.Fatalf("send: %+v", c)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(srv, got); err != nil || string(got) != string(msg) {
		t.Fatalf("peer read %q, %v", got, err)
	}
	for i, answer := range []string{"first", "second"} {
		if _, err := srv.Write([]byte(answer)); err != nil {
			t.Fatal(err)
		}
		c := wait(t, r)
		if c.UserData != 2 || c.Flags&CQEFBuffer == 0 || c.Flags&CQEFMore == 0 {
			t.Fatalf("receive %d: %+v, want a buffer and the receive still armed", i, c)
		}
		if b := br.Bytes(c.BufferID(), int(c.Res)); string(b) != answer {
			t.Errorf("receive %d: %q, want %q", i, b, answer)
		}
		br.Put(c.BufferID())
		br.Commit()
	}
	s = r.Get()
	if byUserData {
		s.PrepCancel(2)
	} else {
		s.PrepCancelFixed(slot)
	}
	s.UserData = 4
	s = r.Get()
	s.PrepCloseFixed(slot)
	s.UserData = 5
	seen := map[uint64]int32{}
	for len(seen) < 3 {
		c := wait(t, r)
		seen[c.UserData] = c.Res
	}
	cancelled := int32(1) // CANCEL_ALL counts them
	if byUserData {
		cancelled = 0
	}
	if seen[2] != -int32(unix.ECANCELED) || seen[4] != cancelled || seen[5] != 0 {
		t.Errorf("cancel and close: %v; want the receive cancelled, one request cancelled, the slot closed", seen)
	}
	// The peer sees the close.
	srv.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := srv.Read(got); !errors.Is(err, io.EOF) {
		t.Errorf("peer read after close: %v, want EOF", err)
	}
}

// TestConnectRefused: a refused connect fails its completion, and the
// requests linked after it are cancelled.
func TestConnectRefused(t *testing.T) {
	r := newRing(t)
	if err := r.RegisterFiles(1); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	sa := &unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte{127, 0, 0, 1}}
	sa.Port = uint16(port>>8) | uint16(port&0xff)<<8
	s := r.Get()
	s.PrepSocket(unix.AF_INET, unix.SOCK_STREAM, 0, 0)
	s.Flags |= SQEIOLink | SQECQESkipSuccess
	s = r.Get()
	s.PrepConnect(0, unsafe.Pointer(sa), unsafe.Sizeof(*sa))
	s.Flags |= SQEIOLink
	s.UserData = 1
	s = r.Get()
	s.PrepSend(0, []byte("x"), 0)
	s.UserData = 2
	if c := wait(t, r); c.UserData != 1 || c.Res != -int32(unix.ECONNREFUSED) {
		t.Fatalf("connect: %+v, want ECONNREFUSED", c)
	}
	if c := wait(t, r); c.UserData != 2 || c.Res != -int32(unix.ECANCELED) {
		t.Fatalf("linked send: %+v, want ECANCELED", c)
	}
}

// TestSubmissionQueueFlush: more SQEs than the queue holds are
// submitted as it fills.
func TestSubmissionQueueFlush(t *testing.T) {
	r := newRing(t)
	const n = 300 // the queue holds 64, the completions 256 (and the overflow list the rest)
	for i := range n {
		s := r.Get()
		if s == nil {
			t.Fatalf("no SQE for request %d", i)
		}
		s.Opcode, s.UserData = OpNop, uint64(i)
	}
	got := 0
	for got < n {
		if err := r.Enter(1, time.Second); err != nil {
			t.Fatal(err)
		}
		h, tl := r.Ready()
		for ; h != tl; h++ {
			if c := r.CQE(h); c.Res != 0 {
				t.Fatalf("nop %d: %d", c.UserData, c.Res)
			}
			got++
		}
		r.Seen(h)
	}
}
