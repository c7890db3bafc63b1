package cli

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// pySlow is a python3 server as a newcomer writes one: http.server on
// socketserver's TCPServer, one request at a time, 10 ms each, HTTP/1.0
// (a connection per request), and socketserver's default backlog, 5.
const pySlow = `
import http.server, socketserver, sys, time
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(0.01)
        self.send_response(200); self.send_header("Content-Length", "3"); self.end_headers()
        try: self.wfile.write(b"ok\n")
        except OSError: pass
    def log_message(self, *a): pass
    def handle_error(self, *a): pass
class S(socketserver.TCPServer):
    allow_reuse_address = True
    def handle_error(self, *a): pass
s = S(("127.0.0.1", 8000), H)
print("ready", flush=True)
s.serve_forever()
`

// nsCLI runs netdoctor (this test binary in its "cli" role) inside
// namespace ns, and returns its exit code and output.
func nsCLI(t *testing.T, ns string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, os.Args[0]}, args...)...)
	cmd.Env = append(os.Environ(), "ND_HELPER=cli")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var ee *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), out.String()
}

// TestNewcomerGenericListener: what a newcomer meets on a small service
// netdoctor has no configuration of, on a host where another service is
// busy. A python3 server (backlog 5) and a Go server (net.Listen, whose
// backlog is somaxconn, 16 in this namespace) both overflow under a run,
// while a third service takes thousands of connections a second from
// another load. For each, the fix is the action first in the server's
// own terms (Python's request_queue_size; somaxconn and a restart for
// Go), never nginx's or php-fpm's; the queue is sized from the
// listener's own accepted and dropped connections, not the namespace's
// TcpPassiveOpens; and `tune plan` of the report plans somaxconn and
// notes the application's part, never leaving the finding out.
func TestNewcomerGenericListener(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not installed: the Python server is not run")
	}
	ns := testNetns(t)
	mustExec(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.core.somaxconn=16")
	startReady(t, exec.Command("ip", "netns", "exec", ns, "python3", "-c", pySlow))
	startHelper(t, ns, "serve", "ND_SERVER=goslow", "ND_ADDR=127.0.0.1:8100")
	startHelper(t, ns, "serve", "ND_SERVER=fast", "ND_ADDR=127.0.0.1:9000")
	// The other service's clients: a connection per request, for longer
	// than both runs; stopped when the test ends.
	busy := exec.Command("ip", "netns", "exec", ns, os.Args[0], "load", "-c", "20", "-d", "60", "--no-keepalive", "http://127.0.0.1:9000/")
	busy.Env = append(os.Environ(), "ND_HELPER=cli")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Process.Kill(); busy.Wait() })

	dir := t.TempDir()
	for _, tc := range []struct {
		name, url, addr string
		fix, plan       []string
		sysctl          bool
	}{
		{"python3", "http://127.0.0.1:8000/", "127.0.0.1:8000",
			[]string{"raise the listen() backlog of 127.0.0.1:8000 (python3 pid ", "Python: socketserver's (and http.server's) `request_queue_size = 4096`"},
			[]string{"raise python3's (pid ", "listen() backlog from 5 to 4096 — Python: socketserver's", "(with net.core.somaxconn raised to 4096 above)"}, true},
		{"go", "http://127.0.0.1:8100/", "127.0.0.1:8100",
			[]string{"Go asks listen() for net.core.somaxconn as it was when it first listened (the socket has 16): restart it once somaxconn is at least 4096"},
			[]string{"is a Go program, whose net.Listen asks listen() for net.core.somaxconn as it was when it first listened (the socket has 16): restart it once net.core.somaxconn is raised to 4096 above"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".json")
			code, text := nsCLI(t, ns, "run", "-c", "100", "-d", "4", "--baseline", "1", "--tail", "1", "--json", out, tc.url)
			if code != ExitFindings {
				t.Fatalf("run: exit %d, want %d\n%s", code, ExitFindings, text)
			}
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			r, err := report.Read(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			var q *report.Finding
			for i := range r.Findings {
				if r.Findings[i].ID == rules.AcceptQueueOverflow && r.Findings[i].Status == report.Active && r.Findings[i].About.Listen == tc.addr {
					q = &r.Findings[i]
				}
			}
			if q == nil {
				t.Fatalf("no active accept-queue-overflow on %s:\n%s", tc.addr, text)
			}
			fix := strings.Join(q.Fix, "\n")
			for _, want := range tc.fix {
				if !strings.Contains(fix, want) {
					t.Errorf("fix lacks %q:\n%s", want, fix)
				}
			}
			if strings.Contains(fix, "nginx") || strings.Contains(fix, "php-fpm") || strings.HasPrefix(q.Fix[0], "why") {
				t.Errorf("fix names another server's syntax, or starts with its reason:\n%s", fix)
			}
			if tc.sysctl != strings.HasPrefix(q.Fix[0], "sysctl -w net.core.somaxconn=4096  (why 4096: ") {
				t.Errorf("first line %q: want somaxconn raised (%v), the reason on its line", q.Fix[0], tc.sysctl)
			}
			// Its own arrivals: the load's connections over its
			// duration, and its own drops, far fewer than the
			// namespace's new connections, most of them the other
			// service's.
			accepted := float64(r.Load.ConnectionsOpened) / r.Load.Elapsed.Seconds()
			passive := r.Summary.Rates["TcpPassiveOpens"]
			if passive < 3*accepted {
				t.Fatalf("the other service was not busy enough to tell: the namespace's %.0f new connections/s, this listener's %.0f", passive, accepted)
			}
			if own := fmt.Sprintf("%.0f/s accepted: the load's %d connections in", accepted, r.Load.ConnectionsOpened); !strings.Contains(fix, own) || !strings.Contains(fix, "/s dropped, by its own count") {
				t.Errorf("fix not sized from the listener's own evidence (%q):\n%s", own, fix)
			}
			if strings.Contains(fix, fmt.Sprintf("%.0f new connections/s", passive)) {
				t.Errorf("the namespace's %.0f new connections/s given to one service:\n%s", passive, fix)
			}
			if q.Explains == "" {
				t.Errorf("no impact on the load stated (caused by %q %q):\n%s", q.CausedBy, q.CauseSubject, text)
			}

			code, plan := nsCLI(t, ns, "tune", "plan", out)
			if code != ExitOK {
				t.Fatalf("tune plan: exit %d\n%s", code, plan)
			}
			if tc.sysctl && !strings.Contains(plan, "sysctl net.core.somaxconn: 16 → 4096 (this namespace)") {
				t.Errorf("plan does not raise somaxconn:\n%s", plan)
			}
			for _, want := range append([]string{"accept-queue-overflow " + tc.addr + ": not planned, because "}, tc.plan...) {
				if !strings.Contains(plan, want) {
					t.Errorf("plan lacks %q:\n%s", want, plan)
				}
			}
			if strings.Contains(plan, "4096 → 4096") {
				t.Errorf("plan proposes what is already so:\n%s", plan)
			}
		})
	}
}
