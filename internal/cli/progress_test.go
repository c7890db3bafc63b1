package cli

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// TestProgress: a live line per second on a terminal, nothing otherwise.
func TestProgress(t *testing.T) {
	sec := load.Second{Index: 2, Length: time.Second, Requests: 5000, P50: 2 * time.Millisecond, P99: 9 * time.Millisecond,
		Errors: load.Errors{Timeout: 3}, OpenConns: 50}

	var buf bytes.Buffer
	p := newProgress(&buf, 10*time.Second, true)
	p.second(sec)
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
	p.done()
	if !strings.HasSuffix(buf.String(), "\r\033[K") {
		t.Errorf("progress line not cleared at the end: %q", buf.String())
	}

	// A regular file is not a terminal either.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if newProgress(f, time.Second, true).tty {
		t.Errorf("a regular file was taken for a terminal")
	}
}
