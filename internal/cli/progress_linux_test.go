package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// openPty opens a pseudo-terminal: the master, which reads what is
// written to the terminal, and the terminal itself.
func openPty(t *testing.T) (master *syncBuffer, term *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil { // unlockpt
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN) // ptsname
		}
	}); err != nil || ierr != nil {
		m.Close()
		t.Fatalf("unlockpt/ptsname: %v %v", err, ierr)
	}
	term, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	master = &syncBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		b := make([]byte, 4096)
		for {
			n, err := m.Read(b)
			master.Write(b[:n])
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		term.Close()
		m.Close()
		<-done
	})
	return master, term
}

// settle writes a mark to the terminal and waits until the master has
// read it: then it has read all that was written before. It returns what
// the master read, marks left out.
func settle(t *testing.T, master *syncBuffer, term *os.File) string {
	t.Helper()
	mark := fmt.Sprintf("{settled %d}", settles.Add(1))
	if _, err := term.WriteString(mark); err != nil {
		t.Fatal(err)
	}
	poll.True(t, time.Minute, "the terminal's output read", func() bool { return strings.Contains(master.String(), mark) })
	return settleRe.ReplaceAllString(master.String(), "")
}

var (
	settles  atomic.Int64
	settleRe = regexp.MustCompile(`\{settled \d+\}`)
)

var clockRe = regexp.MustCompile(`\[(\d+(?:\.\d+)?)s/(\d+(?:\.\d+)?)s\]`)

// checkClocks fails on any elapsed time past its total.
func checkClocks(t *testing.T, out string) {
	t.Helper()
	for _, m := range clockRe.FindAllStringSubmatch(out, -1) {
		el, _ := strconv.ParseFloat(m[1], 64)
		total, _ := strconv.ParseFloat(m[2], 64)
		if el > total {
			t.Errorf("progress shows %s past the duration", m[0])
		}
	}
}

// TestProgressTerminal: on a terminal, the load's seconds appear, count
// up to the duration and no further, and the line is cleared at the end;
// a timed step counts up to its length, then says finishing.
func TestProgressTerminal(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	master, term := openPty(t)
	if !isTerminal(term) {
		t.Fatalf("a pseudo-terminal not taken for a terminal")
	}
	s := wrkServer(t)
	var stdout bytes.Buffer
	if code := Run(context.Background(), []string{"load", "-d", "2", "-c", "2", "-t", "1", s.URL}, &stdout, term); code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stdout.String())
	}
	out := settle(t, master, term)
	if !strings.Contains(out, "[1s/2s] ") || !strings.Contains(out, " req/s  p50 ") {
		t.Errorf("no progress on the terminal: %q", out)
	}
	checkClocks(t, out)
	if !strings.HasSuffix(out, "\r\033[K") {
		t.Errorf("progress line not cleared at the end: %q", out)
	}
	if strings.Contains(stdout.String(), "req/s  p50") {
		t.Errorf("progress on stdout:\n%s", stdout.String())
	}

	// A step counts up each second to its length, then says finishing:
	// done once it did.
	p := newProgress(term, 0, false)
	p.phase("baseline", 1500*time.Millisecond)
	poll.True(t, time.Minute, "the step finishing", func() bool {
		return strings.Contains(master.String(), "[1.5s/1.5s] baseline: sampling before the load  finishing")
	})
	if !stepTicking() {
		t.Fatal("no step ticker while the step runs")
	}
	p.done()
	before := settle(t, master, term)
	got := before[len(out):]
	for _, want := range []string{"[1s/1.5s] baseline: sampling before the load", "[1.5s/1.5s] baseline: sampling before the load  finishing"} {
		if !strings.Contains(got, want) {
			t.Errorf("step progress %q lacks %q", got, want)
		}
	}
	if !strings.HasSuffix(got, "\r\033[K") {
		t.Errorf("step progress not cleared: %q", got)
	}
	// Nothing more: the step's ticker ends with done, having written
	// nothing after it.
	poll.True(t, time.Minute, "the step's ticker ended", func() bool { return !stepTicking() })
	if after := settle(t, master, term); after != before {
		t.Errorf("step progress went on after done: %q", after[len(before):])
	}
}

// stepTicking reports whether a timed step's ticker (progress.phase's)
// runs in this process. Only a progress on a terminal starts one: this
// file's tests', beside each other; a wait for none left may then wait
// for another test's too, and never ends early.
func stepTicking() bool { return poll.Goroutines("cli.(*progress).phase.func") > 0 }

// TestProgressPipe: nothing but the report when stderr is a pipe.
func TestProgressPipe(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := wrkServer(t)
	var stdout bytes.Buffer
	code := Run(context.Background(), []string{"load", "-d", "2", "-c", "2", "-t", "1", s.URL}, &stdout, w)
	w.Close()
	if code != ExitOK {
		t.Fatalf("exit %d\n%s", code, stdout.String())
	}
	var stderr bytes.Buffer
	stderr.ReadFrom(r)
	if stderr.Len() != 0 {
		t.Errorf("written to a piped stderr: %q", stderr.String())
	}
}

// TestProgressRunPhases: netdoctor run shows its baseline, load and
// tail on a terminal, none past its length.
func TestProgressRunPhases(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	master, term := openPty(t)
	s := wrkServer(t)
	var stdout bytes.Buffer
	// Steps of 2.5 s: their first tick, at 1 s, comes before they end
	// however late the machine runs it.
	code := Run(context.Background(), []string{"run", "-d", "2", "-c", "2", "-t", "1", "--baseline", "2500ms", "--tail", "2500ms", s.URL}, &stdout, term)
	if code != ExitOK && code != ExitFindings {
		t.Fatalf("exit %d\n%s", code, stdout.String())
	}
	out := settle(t, master, term)
	for _, want := range []string{"[1s/2.5s] baseline: sampling before the load", "[1s/2s] ", "[1s/2.5s] tail: sampling after the load"} {
		if !strings.Contains(out, want) {
			t.Errorf("run's progress %q lacks %q", out, want)
		}
	}
	checkClocks(t, out)
}
