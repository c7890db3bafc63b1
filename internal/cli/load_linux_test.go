package cli

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/netdoctor/netdoctor/internal/load"
)

// TestLoadPortExhaustion: in a namespace with 10 local ports and no
// TIME_WAIT reuse, short connections run out of ports; the result must
// blame the load generator's host, not the server.
func TestLoadPortExhaustion(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	ns := testNetns(t)
	mustExec(t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_local_port_range=40000 40009", "net.ipv4.tcp_tw_reuse=0")
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(os.Environ(), "ND_HELPER=load", "ND_LOAD_ARGS=load -c 4 -t 1 -d 3s --no-keepalive --json -")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("load in namespace: %v\n%s%s", err, out, stderr.String())
	}
	var r struct {
		URL         string            `json:"url"`
		Requests    uint64            `json:"requests"`
		Saturated   bool              `json:"load_generator_saturated"`
		SaturatedBy []string          `json:"saturated_by"`
		Causes      map[string]uint64 `json:"error_causes"`
		Findings    []struct {
			ID string `json:"id"`
		} `json:"findings"`
	}
	if err := json.Unmarshal(out, &r); err != nil { // --json -: stdout is the JSON alone
		t.Fatalf("%v\n%s", err, out)
	}
	if r.Causes["no-local-port"] == 0 || !r.Saturated || len(r.Findings) != 1 || r.Findings[0].ID != "load-generator-saturated" {
		t.Errorf("causes %v, saturated %v by %v, findings %+v; want no-local-port errors blamed on the generator", r.Causes, r.Saturated, r.SaturatedBy, r.Findings)
	}
	// The first connection of each of the 10 ports works; the server in
	// the namespace listens on an ephemeral port, often one of the same
	// 10. More work only when the server closed first, leaving the
	// client's port free of TIME_WAIT, which is up to timing.
	// load's probe of the target before the load takes one of them
	// (left in TIME_WAIT).
	ports := uint64(10) - 1
	if _, p, _ := strings.Cut(strings.TrimPrefix(r.URL, "http://"), ":"); p >= "40000" && p <= "40009" {
		ports--
	}
	if r.Requests < ports {
		t.Errorf("only %d requests succeeded; the first %d ports should have worked", r.Requests, ports)
	}
	if !strings.Contains(stderr.String(), "WARNING: the load generator may be the bottleneck") {
		t.Errorf("text output (on stderr with --json -) does not warn:\n%s", stderr.String())
	}
}

// TestLoadClosedPort: a load against a port nothing listens on fails
// at once, exit 2, before any load and without a report; a load in which
// no request got a response (a server that resets every connection)
// exits non-zero and says so in one line, after its report.
func TestLoadClosedPort(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/"
	l.Close()
	out := filepath.Join(t.TempDir(), "load.json")
	code, stdout, stderr := runCLI(t, "load", "-c", "2", "-t", "1", "-d", "500ms", "--json", out, url)
	if code != ExitUsage || !strings.Contains(stderr, "nothing accepts connections on "+l.Addr().String()+" (connection refused)") ||
		strings.Count(strings.TrimSpace(stderr), "\n") > 0 || stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q; want %d and one line saying nothing listens", code, stdout, stderr, ExitUsage)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a report was written for a load that never ran")
	}

	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go resetEach(l)
	url = "http://" + l.Addr().String() + "/"
	code, stdout, stderr = runCLI(t, "load", "-c", "2", "-t", "1", "-d", "500ms", "--json", out, url)
	if code != ExitFailed || !strings.Contains(stderr, "no request got a response from "+url) ||
		strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q; want %d and one line saying no request got a response", code, stderr, ExitFailed)
	}
	if !strings.Contains(stdout, "0 requests") {
		t.Errorf("no summary on stdout:\n%s", stdout)
	}
	if _, err := os.Stat(out); err != nil {
		t.Errorf("no JSON report: %v", err)
	}
}

// TestLoadEngineFlag: --engine runs the engine asked for and the report
// names it (the generator's line, the JSON's engine); auto names the one
// it picked; an unknown engine is a one-line usage error before any
// load.
func TestLoadEngineFlag(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	var served atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		served.Add(1)
		io.WriteString(w, "ok\n")
	}))
	defer s.Close()
	want := map[string]load.Engine{"epoll": load.EngineEpoll, "io_uring": load.EngineIOUring}
	picked, _, err := load.EngineFor(load.EngineAuto)
	if err != nil {
		t.Fatal(err)
	}
	want["auto"] = picked
	if _, _, err := load.EngineFor(load.EngineIOUring); err != nil {
		t.Logf("io_uring refused here (%v): not tried", err)
		delete(want, "io_uring")
	}
	for flag, eng := range want {
		out := filepath.Join(t.TempDir(), "load.json")
		code, stdout, stderr := runCLI(t, "load", "-n", "20", "-c", "2", "-t", "1", "-d", "30s", "--engine", flag, "--json", out, s.URL)
		if code != ExitOK {
			t.Fatalf("--engine %s: exit %d\n%s\n%s", flag, code, stdout, stderr)
		}
		var r struct {
			Engine   load.Engine `json:"engine"`
			Requests uint64      `json:"requests"`
		}
		b, err := os.ReadFile(out)
		if err != nil || json.Unmarshal(b, &r) != nil {
			t.Fatalf("--engine %s: report %q: %v", flag, b, err)
		}
		if r.Engine != eng || r.Requests != 20 || !strings.Contains(stdout+stderr, "Load generator: "+string(eng)+" engine, ") {
			t.Errorf("--engine %s: JSON engine %q, %d requests, output:\n%s%s\nwant %s named and 20 requests", flag, r.Engine, r.Requests, stdout, stderr, eng)
		}
	}
	before := served.Load()
	code, stdout, stderr := runCLI(t, "load", "-n", "20", "--engine", "kqueue", s.URL)
	if code != ExitUsage || !strings.Contains(stderr, "kqueue") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 || stdout != "" || served.Load() != before {
		t.Errorf("--engine kqueue: exit %d, stdout %q, stderr %q, %d requests served; want %d, one line and no load", code, stdout, stderr, served.Load()-before, ExitUsage)
	}
}
