package kmsg

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// devKmsg is the kernel log device.
const devKmsg = "/dev/kmsg"

// bufSize is the read buffer. Each read(2) returns exactly one record and
// fails with EINVAL if the buffer cannot hold it; the kernel formats
// records into at most CONSOLE_EXT_LOG_MAX (8 KiB) bytes.
const bufSize = 8 << 10

// maxBatch bounds the records one Read returns, so that a kernel logging
// faster than we read cannot keep Read from returning. The rest stays in
// the ring buffer for the next Read.
const maxBatch = 4096

// Reader reads the records written to /dev/kmsg after Open, which creates
// it. It is not safe for concurrent use. The caller must Close it.
type Reader struct {
	// Lost counts the records the kernel overwrote before Read got to
	// them. When the reader does not yet know the sequence number it
	// expected, an overwrite counts as one lost record, so Lost is a lower
	// bound.
	Lost uint64

	fd   int
	open bool // fd is open; false for a zero Reader and after Close
	buf  []byte
	boot time.Time // wall-clock time of CLOCK_MONOTONIC zero
	next uint64    // sequence number expected next, valid if haveNext
	// haveNext is false until the first record is read.
	haveNext bool
	// overrun is set by EPIPE until the next record tells how many were
	// lost.
	overrun bool
}

// Open opens /dev/kmsg positioned after the last record, so Read returns
// only messages written after Open. The exception is a last record that
// lacks its final newline (a pr_cont line, or a user-space write without
// one): the kernel keeps it open for continuation, and Read returns it once
// it is complete. A missing device or a missing
// permission (CAP_SYSLOG when kernel.dmesg_restrict=1) gives an error
// wrapping ErrUnavailable.
func Open() (*Reader, error) {
	fd, err := unix.Open(devKmsg, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		err = &os.PathError{Op: "open", Path: devKmsg, Err: err}
		if unavailable(err) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return nil, err
	}
	// On /dev/kmsg, SEEK_END moves to the record after the newest one.
	if _, err := unix.Seek(fd, 0, io.SeekEnd); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "seek", Path: devKmsg, Err: err}
	}
	boot, err := bootTime()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &Reader{fd: fd, open: true, buf: make([]byte, bufSize), boot: boot}, nil
}

// unavailable reports whether an open error means that /dev/kmsg cannot be
// used here at all, rather than that something went wrong.
func unavailable(err error) bool {
	for _, e := range []error{unix.EACCES, unix.EPERM, unix.ENOENT, unix.ENODEV, unix.ENXIO} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// bootTime returns the wall-clock time at which CLOCK_MONOTONIC was zero,
// the clock of the records' timestamps.
func bootTime() (time.Time, error) {
	var ts unix.Timespec
	now := time.Now()
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return time.Time{}, fmt.Errorf("clock_gettime CLOCK_MONOTONIC: %w", err)
	}
	// Round(0) drops Go's monotonic reading so the result is wall time only.
	return now.Round(0).Add(-time.Duration(ts.Nano())), nil
}

// Read returns the records available now, oldest first, each classified.
// It does not block: it returns an empty slice if no record was written
// since the last Read. On an error it returns the records read so far.
func (r *Reader) Read() ([]evidence.KernelMsg, error) {
	if !r.open {
		return nil, fmt.Errorf("read %s: %w", devKmsg, os.ErrClosed)
	}
	var msgs []evidence.KernelMsg
	for len(msgs) < maxBatch {
		n, err := unix.Read(r.fd, r.buf)
		switch {
		case errors.Is(err, unix.EAGAIN):
			return msgs, nil
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EPIPE):
			// The kernel overwrote the record we were to read next; the
			// next read returns the oldest record still there.
			r.overrun = true
			continue
		case err != nil:
			return msgs, &os.PathError{Op: "read", Path: devKmsg, Err: err}
		case n == 0:
			return msgs, nil
		}
		rec, err := ParseRecord(r.buf[:n])
		if err != nil {
			return msgs, fmt.Errorf("read %s: %w", devKmsg, err)
		}
		r.account(rec.Seq)
		c := Classify(rec.Text)
		msgs = append(msgs, evidence.KernelMsg{
			Time:     r.boot.Add(rec.Monotonic),
			Priority: rec.Priority,
			Text:     rec.Text,
			Class:    c.Name,
			NetNS:    c.NetNS,
			Port:     c.Port,
			Addr:     c.Addr,
			Family:   c.Family,
		})
	}
	return msgs, nil
}

// account adds to Lost the records skipped before seq.
func (r *Reader) account(seq uint64) {
	switch {
	case r.haveNext && seq > r.next:
		r.Lost += seq - r.next
	case !r.haveNext && r.overrun:
		r.Lost++
	}
	r.overrun = false
	r.next = seq + 1
	r.haveNext = true
}

// Close closes the device. Further Reads fail.
func (r *Reader) Close() error {
	if !r.open {
		return nil
	}
	err := unix.Close(r.fd)
	r.open = false
	if err != nil {
		return &os.PathError{Op: "close", Path: devKmsg, Err: err}
	}
	return nil
}
