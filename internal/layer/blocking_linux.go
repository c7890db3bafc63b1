package layer

import (
	"errors"
	"io"
	"net"
	"syscall"
	"time"
)

// blockingIO reads (or, with write, writes buf) on c until end in
// blocking system calls, as iperf3 does, rather than through Go's
// poller: where the CPU is the limit (an unshaped veth) each wait in the
// poller costs a park, a wake-up and often a move to the other CPU
// (perf stat: 80 000 context switches and 850 migrations in a 2 s
// download, against iperf3's 67 000 and 320), and the stream measured
// the scheduler rather than the path. The goroutine holds its thread
// for the stream's life; the runtime gives the other goroutines another.
// The socket's own timeout (SO_RCVTIMEO, SO_SNDTIMEO) ends a call at
// end, or after maxBlock, when more (if set) is asked again: the caller's
// Ctrl-C or the endpoint's byte budget. ok is false when c has no file
// descriptor, and nothing was done.
// maxBlock bounds one blocking call, so that a stopped test ends soon.
const maxBlock = 100 * time.Millisecond

func blockingIO(c net.Conn, buf []byte, end time.Time, write bool, more func() bool) (n int64, err error, ok bool) {
	sc, isSys := c.(syscall.Conn)
	if !isSys {
		return 0, nil, false
	}
	rc, e := sc.SyscallConn()
	if e != nil {
		return 0, nil, false
	}
	opt := syscall.SO_RCVTIMEO
	if write {
		opt = syscall.SO_SNDTIMEO
	}
	f := func(fd uintptr) bool {
		s := int(fd)
		if err = syscall.SetNonblock(s, false); err != nil {
			return true
		}
		defer syscall.SetNonblock(s, true) // as the poller expects it
		var timeout time.Duration
		for more == nil || more() {
			d := time.Until(end)
			if d <= 0 {
				return true
			}
			// maxBlock, then what is left in the last maxBlock: one
			// setsockopt per call only then.
			if want := min(max(d, time.Millisecond), maxBlock).Truncate(time.Millisecond); want != timeout {
				tv := syscall.NsecToTimeval(want.Nanoseconds())
				if err = syscall.SetsockoptTimeval(s, syscall.SOL_SOCKET, opt, &tv); err != nil {
					return true
				}
				timeout = want
			}
			var m int
			if write {
				m, err = syscall.Write(s, buf)
			} else {
				m, err = syscall.Read(s, buf)
			}
			n += int64(max(m, 0))
			switch {
			case errors.Is(err, syscall.EINTR):
				err = nil
			case errors.Is(err, syscall.EAGAIN):
				err = nil // the timeout: end, or time to ask more
			case err != nil:
				return true
			case !write && m == 0:
				err = io.EOF
				return true
			}
		}
		return true
	}
	if write {
		e = rc.Write(f)
	} else {
		e = rc.Read(f)
	}
	if err == nil {
		err = e
	}
	return n, err, true
}
