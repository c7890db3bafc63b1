package kmsg

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ErrParse is wrapped by errors from ParseRecord.
var ErrParse = errors.New("malformed kmsg record")

// Record is one /dev/kmsg record.
type Record struct {
	// Seq is the record's sequence number. A gap between two records read
	// in a row means the ring buffer overwrote the ones in between.
	Seq uint64
	// Priority is the syslog level, 0 (emerg) to 7 (debug).
	Priority int
	// Facility is the syslog facility: 0 for the kernel, 1 (user) for
	// lines written to /dev/kmsg from user space.
	Facility int
	// Monotonic is the time since boot at which the record was stored.
	Monotonic time.Duration
	// Text is the message with the kernel's \xNN escapes undone. It may
	// contain newlines and bytes that are not valid UTF-8.
	Text string
}

// ParseRecord parses one record as returned by one read(2) on /dev/kmsg:
//
//	6,1234,5678901,-;text\n KEY=value\n
//
// The header holds the syslog priority and facility, the sequence number,
// the timestamp in microseconds and the flags, and may carry further
// comma-separated fields, which are ignored. The continuation lines that
// start with a space are the record's dictionary; they are ignored too.
func ParseRecord(b []byte) (Record, error) {
	header, body, ok := bytes.Cut(b, []byte{';'})
	if !ok {
		return Record{}, fmt.Errorf("%w: no ';' after the header", ErrParse)
	}
	fields := strings.Split(string(header), ",")
	// The flags field is always present since Linux 3.5, but nothing here
	// needs it, so three fields are enough.
	if len(fields) < 3 {
		return Record{}, fmt.Errorf("%w: header %q has %d fields, want at least 3",
			ErrParse, header, len(fields))
	}
	prio, err := strconv.ParseUint(fields[0], 10, 32)
	if err != nil {
		return Record{}, fmt.Errorf("%w: priority: %w", ErrParse, err)
	}
	seq, err := strconv.ParseUint(fields[1], 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("%w: sequence: %w", ErrParse, err)
	}
	usec, err := strconv.ParseUint(fields[2], 10, 64)
	if err != nil {
		return Record{}, fmt.Errorf("%w: timestamp: %w", ErrParse, err)
	}
	if usec > math.MaxInt64/uint64(time.Microsecond) {
		return Record{}, fmt.Errorf("%w: timestamp %d out of range", ErrParse, usec)
	}
	text, _, _ := bytes.Cut(body, []byte{'\n'})
	return Record{
		Seq:       seq,
		Priority:  int(prio & 7),
		Facility:  int(prio >> 3),
		Monotonic: time.Duration(usec) * time.Microsecond,
		Text:      unescape(text),
	}, nil
}

// unescape undoes the kernel's escaping of the record text, which writes
// control characters, bytes above 0x7e and the backslash itself as \xNN.
// Anything that is not a complete \xNN sequence is kept as it is.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+3 < len(b) && b[i+1] == 'x' {
			hi, ok1 := unhex(b[i+2])
			lo, ok2 := unhex(b[i+3])
			if ok1 && ok2 {
				out = append(out, hi<<4|lo)
				i += 3
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

// unhex returns the value of one hexadecimal digit.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}
