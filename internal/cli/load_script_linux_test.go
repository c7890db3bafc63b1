package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func writeScript(t *testing.T, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "s.lua")
	if err := os.WriteFile(p, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

const doneScript = `
function init(args)
  wrk.path = "/" .. args[1]
end
function request()
  return wrk.format()
end
function done(summary, latency, requests)
  print(string.format("done %s %d", type(summary.requests), summary.errors.status))
end
`

// TestLoadScript: -s with the script's argument after --, done's output
// after wrk's last line; with --json -, stdout is the JSON alone and the
// script writes to stderr.
func TestLoadScript(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	var paths sync0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.set(r.URL.Path)
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	s := writeScript(t, doneScript)
	code, stdout, stderr := runCLI(t, "load", "-t1", "-c2", "-d1", "-s", s, srv.URL, "--", "item")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if i, j := strings.Index(stdout, "Transfer/sec"), strings.Index(stdout, "done number 0\n"); i < 0 || j < i {
		t.Errorf("done's line is not after wrk's last:\n%s", stdout)
	}
	if p := paths.get(); p != "/item" {
		t.Errorf("server saw %q, want /item", p)
	}
	code, stdout, stderr = runCLI(t, "load", "-t1", "-c2", "-d1", "--json", "-", "-s", s, srv.URL, "item")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var v map[string]any
	if err := json.Unmarshal([]byte(stdout), &v); err != nil {
		t.Errorf("stdout is not JSON: %v\n%s", err, stdout)
	}
	if tl, _ := v["timeline"].([]any); len(tl) == 0 {
		t.Errorf("no timeline in the JSON")
	}
	if !strings.Contains(stderr, "done number 0") {
		t.Errorf("stderr lacks done's line: %s", stderr)
	}
}

// TestLoadScriptError: an error in a script is one line with its file
// and line, and exit code 2.
func TestLoadScriptError(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	defer srv.Close()
	for _, c := range []struct{ src, want string }{
		{"function request()\n  return wrk.format(nil, nil, nil, 1 + {})\nend\n", "s.lua:2: "},
		{"function done()\n  error('late')\nend\n", "s.lua:2: late"},
		{"function response(\n", "s.lua:2: "},
	} {
		code, _, stderr := runCLI(t, "load", "-t1", "-c1", "-d1", "-s", writeScript(t, c.src), srv.URL)
		if code != ExitUsage || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
			t.Errorf("exit %d, stderr %q; want %d and one line with %q", code, stderr, ExitUsage, c.want)
		}
	}
}

// sync0 holds the last value a handler saw.
type sync0 struct {
	mu sync.Mutex
	v  string
}

func (s *sync0) set(v string) { s.mu.Lock(); s.v = v; s.mu.Unlock() }
func (s *sync0) get() string  { s.mu.Lock(); defer s.mu.Unlock(); return s.v }

// verifyScript counts its setup and init calls, and done prints them with
// the requests of its run.
const verifyScript = `
local setups = 0
function setup(thread)
  setups = setups + 1
end
function init(args)
  wrk.path = "/" .. args[1]
end
function request()
  return wrk.format()
end
function done(summary, latency, requests)
  print(string.format("done setups %d requests %s", setups, summary.requests > 0 and "some" or "none"))
end
`

// testRunVerifyScript: run --verify-with runs the script in both of its
// measurements as a run does, setup, init with the arguments, request
// and done; an empty plan changes nothing.
func testRunVerifyScript(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("--verify-with needs root")
	}
	var paths sync0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths.set(r.URL.Path)
		io.WriteString(w, "ok\n")
	}))
	defer srv.Close()
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"version": 1, "changes": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "run", "-t2", "-c2", "-d1", "--baseline", "100ms", "--tail", "100ms", "--fail-on", "never",
		"--verify-with", plan, "-s", writeScript(t, verifyScript), srv.URL, "item")
	if code != ExitOK {
		t.Fatalf("exit %d: %s\n%s", code, stderr, stdout)
	}
	after := strings.Index(stdout, "3/3 after")
	first, last := strings.Index(stdout, "done setups 2 requests some\n"), strings.LastIndex(stdout, "done setups 2 requests some\n")
	if after < 0 || first < 0 || first > after || last < after {
		t.Errorf("want done's line after each measurement, with 2 setups and requests each:\n%s", stdout)
	}
	if p := paths.get(); p != "/item" {
		t.Errorf("server saw %q, want /item", p)
	}
}
