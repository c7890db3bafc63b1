package kmsg

import (
	"bytes"
	"strconv"
	"time"
)

// Line is one record of the kernel log as syslog(2) and `dmesg -r`
// print it: "<6>[ 2279.905228] text". Continuation lines (those without
// the prefix) belong to the record before them.
type Line struct {
	Priority  int
	Facility  int
	Monotonic time.Duration
	Text      string
}

// ParseSyslog splits the text of SYSLOG_ACTION_READ_ALL into records.
// Records without a timestamp (printk.time=0) cannot be placed in time:
// ok is false when any line lacks one.
func ParseSyslog(b []byte) (lines []Line, ok bool) {
	ok = true
	for len(b) > 0 {
		var l []byte
		l, b, _ = bytes.Cut(b, []byte{'\n'})
		rec, isRecord, timed := parseSyslogLine(l)
		switch {
		case isRecord:
			if !timed {
				ok = false
			}
			lines = append(lines, rec)
		case len(lines) > 0:
			lines[len(lines)-1].Text += "\n" + string(l)
		case len(l) > 0:
			// The buffer starts inside a record the kernel wrapped.
		}
	}
	return lines, ok
}

// parseSyslogLine parses "<N>[ sss.uuuuuu] text"; timed is false for
// "<N>text", a record without a timestamp.
func parseSyslogLine(l []byte) (rec Line, isRecord, timed bool) {
	if len(l) < 3 || l[0] != '<' {
		return Line{}, false, false
	}
	end := bytes.IndexByte(l, '>')
	if end < 2 || end > 4 {
		return Line{}, false, false
	}
	n, err := strconv.Atoi(string(l[1:end]))
	if err != nil || n < 0 {
		return Line{}, false, false
	}
	rec.Priority, rec.Facility = n&7, n>>3
	rest := l[end+1:]
	if len(rest) == 0 || rest[0] != '[' {
		rec.Text = string(rest)
		return rec, true, false
	}
	close := bytes.IndexByte(rest, ']')
	if close < 0 {
		rec.Text = string(rest)
		return rec, true, false
	}
	ts := bytes.TrimSpace(rest[1:close])
	secs, frac, _ := bytes.Cut(ts, []byte{'.'})
	s, err1 := strconv.ParseUint(string(secs), 10, 32)
	us, err2 := strconv.ParseUint(string(frac), 10, 32)
	if err1 != nil || err2 != nil || len(frac) != 6 {
		rec.Text = string(rest)
		return rec, true, false
	}
	rec.Monotonic = time.Duration(s)*time.Second + time.Duration(us)*time.Microsecond
	rec.Text = string(bytes.TrimPrefix(rest[close+1:], []byte{' '}))
	return rec, true, true
}

// newLines are the lines after the atLast-th one stamped last.
func newLines(lines []Line, last time.Duration, atLast int) []Line {
	var out []Line
	seen := 0
	for _, l := range lines {
		switch {
		case l.Monotonic > last:
			out = append(out, l)
		case l.Monotonic == last:
			if seen++; seen > atLast {
				out = append(out, l)
			}
		}
	}
	return out
}
