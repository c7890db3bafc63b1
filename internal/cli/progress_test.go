package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// TestProgress: a live line per second on a terminal, nothing otherwise,
// and never an elapsed time past the duration.
func TestProgress(t *testing.T) {
	sec := load.Second{Index: 2, Length: time.Second, Requests: 5000, P50: 2 * time.Millisecond, P99: 9 * time.Millisecond,
		Errors: load.Errors{Timeout: 3}, OpenConns: 50}

	var buf bytes.Buffer
	p := newProgress(&buf, 10*time.Second, true)
	p.second(sec)
	p.phase("baseline", time.Second)
	p.done()
	if buf.Len() != 0 {
		t.Errorf("progress written to a non-terminal: %q", buf.String())
	}

	p = &progress{w: &buf, tty: true, total: 10 * time.Second}
	p.second(sec)
	for _, want := range []string{"[3s/10s]", "5000 req/s", "p99 9.00ms", "errors 3", "conns 50"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("progress line %q lacks %q", buf.String(), want)
		}
	}
	if strings.Contains(buf.String(), "finishing") {
		t.Errorf("finishing before the end: %q", buf.String())
	}
	p.done()
	if !strings.HasSuffix(buf.String(), "\r\033[K") {
		t.Errorf("progress line not cleared at the end: %q", buf.String())
	}

	// The drain after a 2 s load: its partial third second.
	buf.Reset()
	p = &progress{w: &buf, tty: true, total: 2 * time.Second}
	p.second(load.Second{Index: 2, Length: 300 * time.Microsecond, Requests: 3})
	if got := buf.String(); !strings.Contains(got, "[2s/2s]") || !strings.Contains(got, "finishing") {
		t.Errorf("drain shown as %q, want [2s/2s] … finishing", got)
	}

	// A -n run has no total to count up to.
	buf.Reset()
	p = &progress{w: &buf, tty: true}
	p.second(sec)
	if !strings.Contains(buf.String(), "[3s]") {
		t.Errorf("progress of a -n run %q lacks [3s]", buf.String())
	}
}

// TestProgressNotTerminal: a pipe, /dev/null and a regular file are not
// terminals.
func TestProgressNotTerminal(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for name, file := range map[string]*os.File{"pipe": w, "/dev/null": null, "regular file": f} {
		if isTerminal(file) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}
