package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestBadInput: every mistake gets one clear line and exit code 2.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("{not json"), 0o644)
	future := filepath.Join(dir, "future.json")
	os.WriteFile(future, []byte(`{"version": 99, "snapshots": [{}]}`), 0o644)
	empty := filepath.Join(dir, "empty.json")
	os.WriteFile(empty, []byte(`{"version": 1, "snapshots": []}`), 0o644)
	checkReport := filepath.Join(dir, "check.json")
	os.WriteFile(checkReport, []byte(`{"version": 2, "command": "check", "verdict": "HEALTHY: no problem found", "findings": []}`), 0o644)
	plan := filepath.Join(dir, "plan.json")
	os.WriteFile(plan, []byte(`{"version": 1, "report": "r.json", "command": "check", "changes": []}`), 0o644)
	array := filepath.Join(dir, "array.json")
	os.WriteFile(array, []byte(`[1, 2]`), 0o644)
	other := filepath.Join(dir, "other.json")
	os.WriteFile(other, []byte(`{"a": 1}`), 0o644)
	newer := filepath.Join(dir, "newer.json")
	os.WriteFile(newer, []byte(`{"version": 9, "command": "run"}`), 0o644)
	whole, err := os.ReadFile("../../testdata/runs/healthy.bundle.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(dir, "cut.json.gz")
	os.WriteFile(cut, whole[:len(whole)/2], 0o644)
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"check", "--netns", "no-such-ns-here"}, "no such network namespace: no-such-ns-here"},
		{[]string{"check", "--netns", "/etc/hostname"}, "is not a network namespace"},
		{[]string{"check", "--window", "0s"}, "--window 0s: must be between"},
		{[]string{"check", "--window", "5x"}, `check: invalid value "5x" for flag --window: not a duration "5x"`},
		{[]string{"check", "extra"}, "check takes no arguments"},
		{[]string{"check", "--bogus"}, "check: unknown flag --bogus (netdoctor check --help lists them)"},
		{[]string{"check", "-bogus"}, "check: unknown flag --bogus (netdoctor check --help lists them)"},
		{[]string{"load", "-x", "http://127.0.0.1:1/"}, "load: unknown flag -x (netdoctor load --help lists them)"},
		{[]string{"collect", "--window", "1s"}, "collect needs --out FILE"},
		{[]string{"diagnose"}, "diagnose needs exactly one bundle file"},
		{[]string{"diagnose", filepath.Join(dir, "missing.json")}, "no such file"},
		{[]string{"diagnose", garbage}, "not JSON (invalid character"},
		{[]string{"diagnose", future}, "is a bundle of version 99, newer than this netdoctor reads"},
		{[]string{"diagnose", empty}, "no snapshots"},
		{[]string{"diagnose", checkReport}, "is a netdoctor check report, not a bundle: diagnose reads bundles"},
		{[]string{"diagnose", plan}, "is a netdoctor tune plan, not a bundle"},
		{[]string{"diagnose", array}, "a JSON array, not an object as netdoctor writes"},
		{[]string{"diagnose", other}, "is JSON but not a bundle (it has none of netdoctor's fields)"},
		{[]string{"diagnose", cut}, "truncated: the gzip stream ends before its end"},
		{[]string{"compare", plan, checkReport}, "is a netdoctor tune plan, not a report"},
		{[]string{"compare", checkReport, "../../testdata/runs/healthy.bundle.json.gz"}, "is a netdoctor run bundle, not a report: compare and tune plan read reports"},
		{[]string{"compare", newer, checkReport}, "a netdoctor run report of version 9, newer than this netdoctor reads"},
		{[]string{"compare", cut, checkReport}, "truncated: the gzip stream ends before its end"},
		{[]string{"load"}, "load needs exactly one URL"},
		{[]string{"load", "ftp://127.0.0.1/"}, `scheme "ftp" not supported`},
		{[]string{"load", "127.0.0.1:8080"}, "use http:// or https://"},
		{[]string{"load", "http://"}, "has no host"},
		{[]string{"load", "http://no-such-host.invalid/"}, "cannot resolve host"},
		{[]string{"load", "-c", "0", "http://127.0.0.1:1/"}, "-c 0: need at least one connection"},
		{[]string{"load", "-d", "10x", "http://127.0.0.1:1/"}, `not a duration "10x"`},
		{[]string{"load", "-d10x", "http://127.0.0.1:1/"}, `not a duration "10x"`},
		{[]string{"load", "--duration", "0", "http://127.0.0.1:1/"}, "-d 0s: the duration must be positive"},
		{[]string{"load", "--timeout", "-1", "http://127.0.0.1:1/"}, "--timeout -1s: must be positive"},
		{[]string{"load", "-c", "1q", "http://127.0.0.1:1/"}, `not a count "1q"`},
		{[]string{"load", "--connections", "0", "http://127.0.0.1:1/"}, "-c 0: need at least one connection"},
		{[]string{"load", "--script", "post.lua", "http://127.0.0.1:1/"}, "script error: open post.lua: no such file"},
		{[]string{"load", "-spost.lua", "http://127.0.0.1:1/"}, "script error: open post.lua: no such file"},
		{[]string{"load", "-s", "post.lua"}, "load needs exactly one URL"},
		{[]string{"run", "-s", "post.lua", "http://127.0.0.1:1/"}, "script error: open post.lua: no such file"},
		{[]string{"run", "--baseline", "3y", "http://127.0.0.1:1/"}, `run: invalid value "3y" for flag --baseline`},
		{[]string{"load", "--ramp", "5:1", "http://127.0.0.1:1/"}, "want FROM:TO:DURATION"},
		{[]string{"load", "-H", "nocolon", "http://127.0.0.1:1/"}, "want 'Name: value'"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCLI(t, tt.args...)
			if code != ExitUsage {
				t.Errorf("exit %d, want %d", code, ExitUsage)
			}
			if !strings.Contains(stderr, tt.want) {
				t.Errorf("stderr %q lacks %q", stderr, tt.want)
			}
			if stdout != "" {
				t.Errorf("stdout not empty: %q", stdout)
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 0 && !strings.Contains(stderr, "Usage") {
				t.Errorf("error is %d lines, want one: %q", lines+1, stderr)
			}
		})
	}
}

// TestDiagnoseFixture runs the rules over a bundle captured on a real
// host: a namespace with somaxconn 8 and a listener that never accepts,
// flooded with 50 connections (see testdata/bundles/README.md).
func TestDiagnoseFixture(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, "diagnose", "../../testdata/bundles/accept-overflow.json", "--json", out)
	if code != ExitFindings {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, ExitFindings, stdout, stderr)
	}
	r := readReport(t, out)
	if len(r.Findings) == 0 || r.Findings[0].ID != "accept-queue-overflow" || r.Findings[0].Status != "active" {
		t.Fatalf("first finding = %+v, want active accept-queue-overflow", r.Findings)
	}
	if !strings.HasPrefix(r.Verdict, "UNHEALTHY") || !strings.HasPrefix(stdout, "netdoctor diagnose") {
		t.Errorf("verdict %q; text report starts %q", r.Verdict, stdout[:min(len(stdout), 40)])
	}
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = Run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func readReport(t *testing.T, path string) *report.Report {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r report.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("report is not JSON: %v\n%s", err, b)
	}
	return &r
}

// TestLoadCommand runs `netdoctor load` end to end against a real server,
// in wrk's attached-flag style, and checks the text and JSON results.
func TestLoadCommand(t *testing.T) {
	var hits atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		io.WriteString(w, "hello\n")
	}))
	defer s.Close()
	out := filepath.Join(t.TempDir(), "load.json")
	code, stdout, stderr := runCLI(t, "load", "-c4", "-t1", "-n", "300", "--latency", "-H", "X-Test: 1", "--json", out, s.URL)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"Running 300-request test @ " + s.URL + "\n  1 threads and 4 connections\n", "Connections: keep-alive, 4 opened",
		"300 requests in", "Status: 2xx 300", "Requests/sec:", "Transfer/sec:", "  Latency Distribution\n", ", p99.9 ", "µs CPU per request"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	var r struct {
		Version  int    `json:"version"`
		Requests uint64 `json:"requests"`
		RPS      float64
		Findings []json.RawMessage `json:"findings"`
		Timeline []json.RawMessage `json:"timeline"`
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	if r.Version != report.Version || r.Requests != 300 || hits.Load() != 300 || r.RPS <= 0 || r.Findings == nil || len(r.Timeline) == 0 {
		t.Errorf("json: version %d requests %d (server %d) rps %v findings %v timeline %d", r.Version, r.Requests, hits.Load(), r.RPS, r.Findings, len(r.Timeline))
	}
}

// TestWriteFailure: a report that cannot be written is an error that
// names the file, not a silent success.
func TestWriteFailure(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	// A device is no report file (nor a FIFO, whose open would block):
	// refused at once, in one line, before anything is written.
	code, _, stderr := runCLI(t, "diagnose", "../../testdata/bundles/accept-overflow.json", "--json", "/dev/full")
	if code != ExitFailed || !strings.Contains(stderr, "write report: /dev/full is not a regular file") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestDiagnoseIncidentDeps: an agent's incident carries its last
// dependency trace; diagnose shows the tables and their findings, as
// check does, and a damaged trace is a clear error.
func TestDiagnoseIncidentDeps(t *testing.T) {
	raw, err := os.ReadFile("../../testdata/bundles/accept-overflow.json")
	if err != nil {
		t.Fatal(err)
	}
	var b evidence.Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	pool := app.Dependency{Addr: "10.0.0.1:7300", Owner: "backend (pid 77)", Observed: true, Conns: 4, Seconds: 3, Samples: 30,
		Busy: 0.98, RoundTripsPerSec: 195, RoundTrip: 20 * time.Millisecond, SegsOutPerSec: 195, SegsInPerSec: 195}
	deps := &evidence.Traced{Start: b.Start, Seconds: 3, IntervalMS: 100, Followed: 1,
		Servers: []*app.Server{{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Deps: []app.Dependency{pool}}}}
	b.Incident = &evidence.Incident{Time: b.Start, Dependencies: deps,
		Findings: []evidence.IncidentFinding{{ID: "accept-queue-overflow", Severity: "critical", Time: b.Start}}}
	whole, _ := json.Marshal(evidence.NamespaceFile(&b))
	// damaged is the same incident with its trace's servers a number.
	var doc map[string]any
	json.Unmarshal(whole, &doc)
	doc["incident"].(map[string]any)["dependencies"] = map[string]any{"servers": 3}
	damaged, _ := json.Marshal(doc)
	write := func(out []byte) string {
		path := filepath.Join(t.TempDir(), "incident.json")
		if err := os.WriteFile(path, out, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	_, stdout, stderr := runCLI(t, "diagnose", write(whole))
	for _, want := range []string{"Dependencies (the outbound connections", "10.0.0.1:7300 (backend (pid 77))", "dependency-pool-saturated"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("diagnose of an incident with dependencies: no %q in\n%s%s", want, stdout, stderr)
		}
	}
	code, _, stderr := runCLI(t, "diagnose", write(damaged))
	if code == 0 || !strings.Contains(stderr, `"incident.dependencies.servers"`) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("a damaged trace: exit %d, %q", code, stderr)
	}
}

// TestVersion: --version's first line is the VERSION file's release with
// the commit, as the build and the package read it.
func TestVersion(t *testing.T) {
	b, err := os.ReadFile("../../VERSION")
	if err != nil {
		t.Fatal(err)
	}
	want := "netdoctor " + strings.TrimSpace(string(b)) + " (commit "
	for _, args := range [][]string{{"--version"}, {"version"}} {
		code, stdout, _ := runCLI(t, args...)
		if first, _, _ := strings.Cut(stdout, "\n"); code != ExitOK || !strings.HasPrefix(first, want) {
			t.Errorf("%v: exit %d, first line %q; want %q…", args, code, first, want)
		}
	}
}
