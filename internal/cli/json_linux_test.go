package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// onlyJSON decodes stdout as exactly one JSON document: nothing before
// it, nothing after it.
func onlyJSON(t *testing.T, what, stdout string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader([]byte(stdout)))
	var v map[string]any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%s: stdout is not JSON: %v\n%s", what, err, stdout)
	}
	var more json.RawMessage
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: stdout has more than the JSON report: %v\n%s", what, err, stdout)
	}
	return v
}

// TestJSONStdout: `--json -` writes only the JSON report to stdout, for
// every command that has --json (load's is its own engineer's test):
// whatever text the command prints goes to stderr, and scripts pipe
// stdout to jq.
func TestJSONStdout(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok\n") }))
	defer srv.Close()
	for _, args := range [][]string{
		{"check", "--window", "100ms", "--no-dns", "--json", "-"},
		{"diagnose", "../../testdata/bundles/accept-overflow.json", "--json", "-"},
		{"diagnose", "--json", "-", "../../testdata/runs/dns-slow-resolver.bundle.json.gz"},
		{"run", "-c", "2", "-d", "1s", "--baseline", "100ms", "--tail", "100ms", "--json", "-", srv.URL + "/"},
	} {
		code, stdout, stderr := runCLI(t, args...)
		if code != ExitOK && code != ExitFindings {
			t.Errorf("%v: exit %d\n%s", args, code, stderr)
			continue
		}
		v := onlyJSON(t, args[0], stdout)
		if want := map[bool]string{true: "run", false: args[0]}[args[0] == "run" || strings.HasSuffix(args[3], ".gz")]; v["command"] != want || v["status"] == nil || v["verdict"] == nil {
			t.Errorf("%v: report has command %v, status %v, verdict %v", args, v["command"], v["status"], v["verdict"])
		}
	}
	code, stdout, stderr := runCLI(t, "diagnose", "--json", "-", "--html", "-", "../../testdata/runs/dns-slow-resolver.bundle.json.gz")
	if code != ExitUsage || stdout != "" {
		t.Errorf("diagnose --json - --html -: exit %d, stdout %q, stderr %q; want exit 2 and nothing on stdout", code, stdout, stderr)
	}
}
