package loadtest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// get makes one GET with c and returns the status and body.
func get(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", url, err)
	}
	return resp.StatusCode, string(b)
}

// keepAliveClient reuses one connection.
func keepAliveClient(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, MaxConnsPerHost: 1}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

func TestStartNginxKeepAlive(t *testing.T) {
	n := StartNginx(t, NginxConfig{AccessLog: true, KeepaliveRequests: 1000000, CPU: -1})
	c := keepAliveClient(t)
	const requests = 5
	for range requests {
		status, body := get(t, c, "http://"+n.Addr+"/")
		if status != http.StatusOK || body != "hello\n" {
			t.Fatalf("GET / = %d %q, want 200 %q", status, body, "hello\n")
		}
	}

	lines := n.AccessLogLines(t, requests)
	if len(lines) != requests {
		t.Fatalf("access log has %d lines, want %d:\n%s", len(lines), requests, strings.Join(lines, "\n"))
	}
	var conn string
	var got []string
	for _, l := range lines {
		// $status $request_length $body_bytes_sent $connection $connection_requests
		f := strings.Fields(l)
		if len(f) != 5 {
			t.Fatalf("access log line %q: want 5 fields", l)
		}
		if conn == "" {
			conn = f[3]
		}
		if f[3] != conn {
			t.Errorf("access log line %q: connection %s, want %s (keep-alive)", l, f[3], conn)
		}
		got = append(got, f[0]+" "+f[2]+" "+f[4])
	}
	want := []string{"200 6 1", "200 6 2", "200 6 3", "200 6 4", "200 6 5"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("access log status, body bytes, connection requests mismatch (-want +got):\n%s", diff)
	}
}

func TestStartNginxConfig(t *testing.T) {
	n := StartNginx(t, NginxConfig{
		Workers: 2,
		CPU:     -1,
		Backlog: 4096,
		Body:    "say \"hi\"\\ $connection_requests\n",
		Extra:   "location = /empty { return 204; }",
	})
	c := keepAliveClient(t)
	if status, body := get(t, c, "http://"+n.Addr+"/"); status != 200 || body != "say \"hi\"\\ 1\n" {
		t.Errorf("GET / = %d %q, want 200 %q", status, body, "say \"hi\"\\ 1\n")
	}
	if status, _ := get(t, c, "http://"+n.Addr+"/empty"); status != http.StatusNoContent {
		t.Errorf("GET /empty = %d, want 204", status)
	}
	if n.AccessLog != "" {
		t.Errorf("AccessLog = %q with the access log off, want \"\"", n.AccessLog)
	}
	if b, err := os.ReadFile(n.Dir + "/nginx.conf"); err != nil || !strings.Contains(string(b), "backlog=4096") {
		t.Errorf("nginx.conf lacks backlog=4096 (%v):\n%s", err, b)
	}
}

func TestStartNginxFreePorts(t *testing.T) {
	a := StartNginx(t, NginxConfig{CPU: -1})
	b := StartNginx(t, NginxConfig{CPU: -1})
	if a.Addr == b.Addr {
		t.Errorf("two nginx listen on the same address %s", a.Addr)
	}
	if !strings.HasPrefix(a.Addr, "127.0.0.1:") {
		t.Errorf("Addr = %q, want 127.0.0.1:PORT", a.Addr)
	}
}

func TestStartNginxProcessStop(t *testing.T) {
	if _, err := nginxBinary(); err != nil {
		t.Skip(err)
	}
	pgrep, err := exec.LookPath("pgrep")
	if err != nil {
		t.Skip("pgrep not installed")
	}
	dir := t.TempDir()
	n, stop, err := StartNginxProcess(NginxConfig{Workers: 2, CPU: -1}, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() }) // in case a check below fails first
	// Workers retitle themselves "nginx: worker process" (once they run,
	// which on a busy machine may be a while after the master listens),
	// so find them by their process group, which is the master's.
	group := strconv.Itoa(n.PID)
	poll.Until(t, time.Minute, func() error {
		if out, _ := exec.Command(pgrep, "-f", dir).Output(); strings.TrimSpace(string(out)) != group {
			return fmt.Errorf("pgrep -f %s = %q, want the master %s", dir, out, group)
		}
		if out, _ := exec.Command(pgrep, "-g", group).Output(); len(strings.Fields(string(out))) != 3 {
			return fmt.Errorf("pgrep -g %s = %q, want a master and 2 workers", group, out)
		}
		return nil
	})
	if err := stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := stop(); err != nil {
		t.Errorf("second stop: %v", err)
	}
	// The master is gone when stop returns, and took its workers along.
	for _, args := range [][]string{{"-f", dir}, {"-g", group}} {
		out, err := exec.Command(pgrep, args...).Output()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 {
			t.Errorf("pgrep %s after stop = %q, %v; want no process (exit status 1)", strings.Join(args, " "), out, err)
		}
	}
	if c, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
		c.Close()
		t.Errorf("%s still accepts connections after stop", n.Addr)
	}
}

func TestStartNginxPortInUse(t *testing.T) {
	if _, err := nginxBinary(); err != nil {
		t.Skip(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, _, err = StartNginxProcess(NginxConfig{Listen: l.Addr().String(), CPU: -1}, t.TempDir())
	if !errors.Is(err, errAddrInUse) {
		t.Errorf("StartNginxProcess on a busy port: err = %v, want address in use", err)
	}
}

func TestNginxConfigInvalid(t *testing.T) {
	for _, cfg := range []NginxConfig{
		{Workers: 2},            // CPU 0 pins a single worker
		{Workers: -1, CPU: -1},  // no workers
		{Listen: "127.0.0.1"},   // no port
		{Backlog: -1, CPU: -1},  // negative backlog
		{KeepaliveRequests: -5}, // negative keepalive_requests
	} {
		if _, err := cfg.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v): no error", cfg)
		}
	}
}

func TestQuote(t *testing.T) {
	got := quote("a\"b\\c\n\t$x")
	want := `"a\"b\\c\n\t$x"`
	if got != want {
		t.Errorf("quote = %s, want %s", got, want)
	}
}
