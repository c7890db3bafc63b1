package kmsg

import (
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// syslog(2) actions (linux/syslog.h).
const (
	syslogActionReadAll    = 3
	syslogActionSizeBuffer = 10
)

// SyslogReader reads the kernel log through syslog(2) where /dev/kmsg
// cannot be opened: in a container, whose device cgroup refuses the
// device to anyone not privileged, but whose CAP_SYSLOG still lets it
// read the log. syslog(2) returns the whole ring buffer each time,
// without sequence numbers: the records after the last one seen are
// told apart by their timestamps.
type SyslogReader struct {
	// Lost counts the times the ring buffer no longer held the last
	// record seen when read again: records were overwritten unread. It is
	// a lower bound.
	Lost uint64

	buf  []byte
	boot time.Time
	// last is the timestamp of the newest record seen, and atLast how
	// many records with that timestamp were seen.
	last   time.Duration
	atLast int
}

// OpenSyslog positions a SyslogReader after the newest record. It fails
// wrapping ErrUnavailable without CAP_SYSLOG (when dmesg_restrict is 1),
// and when the records carry no timestamps (printk.time=0).
func OpenSyslog() (*SyslogReader, error) {
	size, err := unix.Klogctl(syslogActionSizeBuffer, nil)
	if err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
			return nil, fmt.Errorf("%w: syslog(2): %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("syslog(2): %w", err)
	}
	boot, err := bootTime()
	if err != nil {
		return nil, err
	}
	r := &SyslogReader{buf: make([]byte, max(size, 1<<14)), boot: boot}
	lines, err := r.readAll()
	if err != nil {
		return nil, err
	}
	r.mark(lines)
	return r, nil
}

func (r *SyslogReader) readAll() ([]Line, error) {
	n, err := unix.Klogctl(syslogActionReadAll, r.buf)
	if err != nil {
		if errors.Is(err, unix.EPERM) {
			return nil, fmt.Errorf("%w: syslog(2): %w", ErrUnavailable, err)
		}
		return nil, fmt.Errorf("syslog(2): %w", err)
	}
	lines, ok := ParseSyslog(r.buf[:n])
	if !ok {
		return nil, fmt.Errorf("%w: the kernel log has no timestamps (printk.time=0): new records cannot be told from old", ErrUnavailable)
	}
	return lines, nil
}

// mark notes the newest record of lines as seen.
func (r *SyslogReader) mark(lines []Line) {
	r.atLast = 0
	for _, l := range lines {
		switch {
		case l.Monotonic > r.last:
			r.last, r.atLast = l.Monotonic, 1
		case l.Monotonic == r.last:
			r.atLast++
		}
	}
}

// Read returns the records written since the last Read (or OpenSyslog),
// oldest first, each classified.
func (r *SyslogReader) Read() ([]evidence.KernelMsg, error) {
	lines, err := r.readAll()
	if err != nil {
		return nil, err
	}
	news := newLines(lines, r.last, r.atLast)
	if len(lines) > 0 && lines[0].Monotonic > r.last && r.last > 0 {
		// The oldest record held is newer than the last one seen.
		r.Lost++
	}
	var msgs []evidence.KernelMsg
	for _, l := range news {
		c := Classify(l.Text)
		msgs = append(msgs, evidence.KernelMsg{
			Time: r.boot.Add(l.Monotonic), Priority: l.Priority, Text: l.Text,
			Class: c.Name, NetNS: c.NetNS, Port: c.Port, Addr: c.Addr, Family: c.Family,
		})
	}
	if len(news) > 0 {
		last := news[len(news)-1].Monotonic
		if last == r.last {
			r.atLast += len(news)
		} else {
			r.last, r.atLast = last, 0
			for _, l := range news {
				if l.Monotonic == last {
					r.atLast++
				}
			}
		}
	}
	return msgs, nil
}

// Close releases nothing: syslog(2) holds no descriptor.
func (r *SyslogReader) Close() error { return nil }
