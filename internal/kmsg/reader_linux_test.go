package kmsg

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// writeKmsg writes one line to the kernel log, as user space does. The
// line must end with a newline: the kernel keeps a record without one open
// for continuation, and readers see it only once the next record arrives.
func writeKmsg(t *testing.T, line string) {
	t.Helper()
	f, err := os.OpenFile(devKmsg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatalf("write %s: %v", devKmsg, err)
	}
}

// readMarked reads from r until a message containing marker arrives (a
// minute at most), and returns all messages containing marker.
func readMarked(t *testing.T, r *Reader, marker string) []evidence.KernelMsg {
	t.Helper()
	var got []evidence.KernelMsg
	poll.Wait(time.Minute, func() bool {
		msgs, err := r.Read()
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		for _, m := range msgs {
			if strings.Contains(m.Text, marker) {
				got = append(got, m)
			}
		}
		return len(got) > 0
	})
	return got
}

func TestReader(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to write /dev/kmsg")
	}
	marker := fmt.Sprintf("netdoctor-test-%d-%d", os.Getpid(), time.Now().UnixNano())

	writeKmsg(t, "<4>netdoctor-test: "+marker+" before open: TCP: time wait bucket table overflow\n")
	r, err := Open()
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	start := time.Now()
	writeKmsg(t, "<4>netdoctor-test: "+marker+" after open: TCP: time wait bucket table overflow\n")

	got := readMarked(t, r, marker)
	if len(got) != 1 {
		t.Fatalf("Read returned %d messages with the marker, want 1: %+v", len(got), got)
	}
	m := got[0]
	if strings.Contains(m.Text, "before open") {
		t.Errorf("Read returned a message written before Open: %q", m.Text)
	}
	want := "netdoctor-test: " + marker + " after open: TCP: time wait bucket table overflow"
	if m.Text != want {
		t.Errorf("Text = %q, want %q", m.Text, want)
	}
	if m.Class != ClassTimewaitOverflow {
		t.Errorf("Class = %q, want %q", m.Class, ClassTimewaitOverflow)
	}
	if m.Priority != 4 {
		t.Errorf("Priority = %d, want 4", m.Priority)
	}
	// The kernel stamps records with local_clock(), which may drift a
	// little from CLOCK_MONOTONIC; allow for that and for a busy host.
	if d := m.Time.Sub(start); d < -5*time.Second || d > 5*time.Second {
		t.Errorf("Time = %v, %v from the write, want within 5s", m.Time, d)
	}
	if r.Lost != 0 {
		t.Errorf("Lost = %d, want 0", r.Lost)
	}

	// Nothing new: Read must return at once with no marked message.
	msgs, err := r.Read()
	if err != nil {
		t.Fatalf("second Read: %v", err)
	}
	for _, m := range msgs {
		if strings.Contains(m.Text, marker) {
			t.Errorf("second Read returned %q again", m.Text)
		}
	}
}

func TestReaderClosed(t *testing.T) {
	r, err := Open()
	if err != nil {
		t.Skipf("Open: %v", err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := r.Read(); err == nil {
		t.Error("Read after Close succeeded, want an error")
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestAccountLost(t *testing.T) {
	r := &Reader{}
	r.overrun = true
	r.account(10) // overrun before the first record: at least one lost
	r.account(11)
	r.account(15) // 12, 13 and 14 overwritten
	if r.Lost != 4 {
		t.Errorf("Lost = %d, want 4", r.Lost)
	}
}
