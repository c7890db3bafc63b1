package cli

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/rules"
)

type runJSON struct {
	Verdict  string          `json:"verdict"`
	Findings []rules.Finding `json:"findings"`
	Load     struct {
		Requests uint64 `json:"requests"`
	} `json:"load"`
	Sides []struct {
		Name     string `json:"name"`
		Observed bool   `json:"observed"`
	} `json:"sides"`
}

// runInNetns runs `netdoctor run` inside a fresh namespace against a
// server of the given kind there, and returns its exit code and report.
func runInNetns(t *testing.T, server, args string, setup ...[]string) (int, *runJSON, string) {
	t.Helper()
	ns := testNetns(t)
	for _, s := range setup {
		mustExec(t, append([]string{"ip", "netns", "exec", ns}, s...)...)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(os.Environ(), "ND_HELPER=run", "ND_SERVER="+server, "ND_RUN_ARGS=run "+args+" --json -")
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(out), "\n{")
	if i < 0 {
		t.Fatalf("no JSON report (exit %d):\n%s", code, out)
	}
	var r runJSON
	if err := json.Unmarshal(out[i+1:], &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return code, &r, string(out[:i])
}

func findActive(r *runJSON, id string) *rules.Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id && r.Findings[i].Status == rules.Active {
			return &r.Findings[i]
		}
	}
	return nil
}

// TestRunAcceptQueue: a server with backlog 8 accepting every 20 ms under
// 100 connections: run must report the accept-queue overflow, seen during
// the load, with the listener named.
func TestRunAcceptQueue(t *testing.T) {
	code, r, text := runInNetns(t, "slow", "-c 100 -t 1 -d 3s --baseline 1s --tail 1s")
	f := findActive(r, "accept-queue-overflow")
	if code != ExitFindings || f == nil {
		t.Fatalf("exit %d, findings %+v; want active accept-queue-overflow\n%s", code, r.Findings, text)
	}
	if f.Subject != "127.0.0.1:7200" || f.Side != "local" {
		t.Errorf("finding subject %q side %q", f.Subject, f.Side)
	}
	window := false
	for _, e := range f.Evidence {
		window = window || (e.Window && strings.Contains(e.Text, "TcpExt.ListenOverflows +"))
	}
	if !window || r.Load.Requests == 0 {
		t.Errorf("evidence %+v, requests %d: want ListenOverflows from the load window", f.Evidence, r.Load.Requests)
	}
	if !strings.HasPrefix(r.Verdict, "UNHEALTHY: Accept queue overflow") {
		t.Errorf("verdict %q", r.Verdict)
	}
}

// TestRunHealthy: a fast server with the default backlog gets no
// critical finding.
func TestRunHealthy(t *testing.T) {
	code, r, text := runInNetns(t, "fast", "-c 20 -t 1 -d 2s --baseline 1s --tail 1s")
	for _, f := range r.Findings {
		if f.Severity == rules.Critical {
			t.Errorf("critical finding on a healthy server: %s %s %+v", f.ID, f.Title, f.Evidence)
		}
	}
	if code != ExitOK || r.Load.Requests == 0 || len(r.Sides) != 2 || !r.Sides[0].Observed {
		t.Errorf("exit %d, requests %d, sides %+v\n%s", code, r.Load.Requests, r.Sides, text)
	}
}
