package cli

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// closedPort is a port on 127.0.0.1 that nothing listens on: one the
// kernel just gave a listener that is closed again.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	ln.Close()
	return port
}

// TestFailFast: what makes a command fail is checked before it measures
// anything: an output it could not write, a target nothing listens on.
// Each exits 2 with one line at once, where it used to sample its whole
// window or load first (collect 10 s, check 5 s, load and run 10 s and
// more) and fail only at the end. The bound, 2 s, is generous on
// purpose: it is a fifth of the shortest old duration, and this machine
// is shared and noisy; the exits measured here take tens of
// milliseconds.
func TestFailFast(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-such-dir", "out.json")
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	closed := "http://127.0.0.1:" + closedPort(t) + "/"
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"collect", "--out", missing}, "--out " + missing + ": directory " + filepath.Dir(missing) + " does not exist"},
		{[]string{"collect", "--window", "10s", "--out", dir}, "is a directory: name a file"},
		{[]string{"check", "--json", missing}, "does not exist"},
		{[]string{"check", "--html", filepath.Join(file, "x.html")}, "is not a directory"},
		{[]string{"run", "--json", missing, closed}, "--json " + missing + ": directory"},
		{[]string{"run", "--html", missing, closed}, "--html " + missing},
		{[]string{"run", "--bundle", missing, closed}, "--bundle " + missing},
		{[]string{"run", "-d", "10s", closed}, "nothing accepts connections on 127.0.0.1:"},
		{[]string{"load", "-d", "10s", closed}, "nothing accepts connections on 127.0.0.1:"},
		{[]string{"load", "--json", missing, closed}, "--json " + missing},
		{[]string{"capacity", "--slo", "p99<=100ms", closed}, "nothing accepts connections on 127.0.0.1:"},
		{[]string{"diagnose", "--json", missing, "../../testdata/bundles/accept-overflow.json"}, "does not exist"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			start := time.Now()
			code, stdout, stderr := runCLI(t, tt.args...)
			took := time.Since(start)
			if code != ExitUsage || !strings.Contains(stderr, tt.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", code, stderr, ExitUsage, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q, want nothing: nothing was measured", stdout)
			}
			if took > 2*time.Second {
				t.Errorf("took %v to fail: the check comes after measuring", took)
			}
			t.Logf("exit %d in %v", code, took.Round(time.Millisecond))
		})
	}
}

// TestCapacityUpFront: load -c beyond what this host can open is said on
// stderr before the load starts, with the count the load will run (the
// header then shows it), not only in the result at the end.
func TestCapacityUpFront(t *testing.T) {
	var stderr bytes.Buffer
	o := load.Options{Connections: 1 << 30}
	n := connRoom(&o, &stderr)
	if n >= 1<<30 || !strings.Contains(stderr.String(), "netdoctor: -c 1073741824 exceeds the open-file limit") || !strings.Contains(stderr.String(), fmt.Sprintf("running %d connections", n)) {
		t.Errorf("capacity: %d, %q", n, stderr.String())
	}
	stderr.Reset()
	if n := connRoom(&load.Options{Connections: 10}, &stderr); n != 10 || stderr.Len() != 0 {
		t.Errorf("10 connections: %d, %q", n, stderr.String())
	}
}
