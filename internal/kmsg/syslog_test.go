package kmsg

import (
	"os"
	"testing"
	"time"
)

// TestParseSyslog reads SYSLOG_ACTION_READ_ALL's text as this kernel
// wrote it (`dmesg -r`, testdata/syslog-read-all.txt), with what the
// ring buffer may hold at its edges: the tail of a record cut by the
// wrap, a record continued on the next line, one without a timestamp,
// and a user-space record (facility 1).
func TestParseSyslog(t *testing.T) {
	b, err := os.ReadFile("testdata/syslog-read-all.txt")
	if err != nil {
		t.Fatal(err)
	}
	lines, ok := ParseSyslog(b)
	if ok {
		t.Error("a record without a timestamp must make the buffer unusable (ok = false)")
	}
	if len(lines) != 43 {
		t.Fatalf("%d records, want 43 (45 lines: one cut by the wrap, one continuation)", len(lines))
	}
	first := lines[0]
	if first.Priority != 6 || first.Facility != 0 || first.Monotonic != 2279905228*time.Microsecond || first.Text != "TCP: request_sock_TCP: Possible SYN flooding on port 10.99.162.1:80. Sending cookies." {
		t.Errorf("first record %+v", first)
	}
	if c := Classify(first.Text); c.Port != 80 {
		t.Errorf("the SYN flooding record classifies as %+v", c)
	}
	multi := lines[len(lines)-3]
	if multi.Text != "multi-line record\n continuation of it" {
		t.Errorf("continued record %q", multi.Text)
	}
	if l := lines[len(lines)-2]; l.Priority != 4 || l.Monotonic != 0 || l.Text != "no timestamp here" {
		t.Errorf("untimed record %+v", l)
	}
	if l := lines[len(lines)-1]; l.Facility != 1 || l.Priority != 4 || l.Monotonic != multi.Monotonic {
		t.Errorf("user record %+v", l)
	}
	for _, bad := range []string{"", "\n\n", "<", "<>[1.000000] x", "<999999>[1.000000] x", "<6>[1.00] short fraction", "<6>[abc.000000] x", "<6>[1.000000 no close"} {
		ls, ok := ParseSyslog([]byte(bad))
		for _, l := range ls {
			if ok && l.Monotonic == 0 {
				t.Errorf("%q: ok with an untimed record %+v", bad, l)
			}
		}
	}
}

// TestNewLines: records stamped alike are told apart by how many of
// them were seen, so that none is returned twice or skipped.
func TestNewLines(t *testing.T) {
	us := time.Microsecond
	buf := []Line{{Monotonic: 1 * us, Text: "a"}, {Monotonic: 2 * us, Text: "b"}, {Monotonic: 2 * us, Text: "c"}, {Monotonic: 3 * us, Text: "d"}}
	for _, c := range []struct {
		last   time.Duration
		atLast int
		want   string
	}{
		{0, 0, "abcd"},
		{1 * us, 1, "bcd"},
		{2 * us, 1, "cd"},
		{2 * us, 2, "d"},
		{3 * us, 1, ""},
		{5 * us, 1, ""},
	} {
		got := ""
		for _, l := range newLines(buf, c.last, c.atLast) {
			got += l.Text
		}
		if got != c.want {
			t.Errorf("after %v ×%d: %q, want %q", c.last, c.atLast, got, c.want)
		}
	}
}

func FuzzParseSyslog(f *testing.F) {
	if b, err := os.ReadFile("testdata/syslog-read-all.txt"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("<6>[    1.000000] x\n y\n<7>z"))
	f.Fuzz(func(t *testing.T, b []byte) {
		lines, _ := ParseSyslog(b)
		for _, l := range lines {
			if l.Priority < 0 || l.Priority > 7 || l.Monotonic < 0 || l.Facility < 0 {
				t.Fatalf("%+v from %q", l, b)
			}
		}
	})
}
