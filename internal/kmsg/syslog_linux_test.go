package kmsg

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestSyslogReader: through syslog(2), a record written after Open is
// read once, in order, at the time it was written; what was in the log
// before is not.
func TestSyslogReader(t *testing.T) {
	r, err := OpenSyslog()
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("syslog(2) unavailable here (needs CAP_SYSLOG): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if msgs, err := r.Read(); err != nil || len(msgs) > 0 && strings.Contains(msgs[0].Text, "netdoctor-syslog-test") {
		t.Fatalf("first Read: %v %+v", err, msgs)
	}
	w, err := os.OpenFile(devKmsg, os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("cannot write to %s: %v", devKmsg, err)
	}
	defer w.Close()
	tag := fmt.Sprintf("netdoctor-syslog-test %d", time.Now().UnixNano())
	for i := range 3 {
		// Neutral text: other tests' readers may be watching the log.
		if _, err := fmt.Fprintf(w, "<6>%s %d\n", tag, i); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	poll.Wait(time.Minute, func() bool {
		msgs, err := r.Read()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			if strings.Contains(m.Text, tag) {
				got = append(got, m.Text)
				if m.Priority != 6 {
					t.Errorf("%q: priority %d, written 6", m.Text, m.Priority)
				}
				if d := time.Since(m.Time); d < -time.Second || d > 10*time.Second {
					t.Errorf("record dated %v ago", d)
				}
			}
		}
		return len(got) >= 3
	})
	if len(got) != 3 {
		t.Fatalf("read %d of the 3 records: %q", len(got), got)
	}
	for i, g := range got {
		if !strings.HasSuffix(g, fmt.Sprintf("%s %d", tag, i)) {
			t.Errorf("record %d: %q (out of order or repeated)", i, g)
		}
	}
	if msgs, _ := r.Read(); len(msgs) > 0 {
		for _, m := range msgs {
			if strings.Contains(m.Text, tag) {
				t.Errorf("read again: %q", m.Text)
			}
		}
	}
}
