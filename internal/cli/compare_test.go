package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCompare(t *testing.T) {
	dir := t.TempDir()
	before := filepath.Join(dir, "before.json")
	after := filepath.Join(dir, "after.json")
	os.WriteFile(before, []byte(`{"version":1,"command":"run","findings":[
		{"id":"conntrack-table-full","severity":"critical","status":"active","title":"Connection tracking table full","side":"server"},
		{"id":"accept-queue-overflow","severity":"critical","status":"active","title":"Accept queue overflow","subject":"10.0.0.2:80","side":"server"}],
		"load":{"rps":189.5,"requests":1895,"status":{"2xx":300,"5xx":1595},"errors":{"connect":0,"read":12,"write":0,"timeout":40},
		"latency":{"p50_ns":2000000,"p99_ns":1500000000,"max_ns":2000000000}}}`), 0o644)
	os.WriteFile(after, []byte(`{"version":1,"command":"run","findings":[
		{"id":"accept-queue-overflow","severity":"critical","status":"active","title":"Accept queue overflow","subject":"10.0.0.2:80","side":"server"}],
		"load":{"rps":5382.1,"requests":53821,"status":{"2xx":53821},"errors":{},
		"latency":{"p50_ns":1000000,"p99_ns":20000000,"max_ns":90000000}}}`), 0o644)
	code, stdout, stderr := runCLI(t, "compare", before, after)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"requests/s", "190", "5382", "×28.40", "non-2xx/3xx", "1595", "-1595",
		"Findings gone:\n  [critical active] Connection tracking table full (conntrack-table-full)",
		"Findings new:\n  none", "Findings in both:\n  [critical active] Accept queue overflow (accept-queue-overflow)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare output lacks %q:\n%s", want, stdout)
		}
	}
	garbage := filepath.Join(dir, "g.json")
	os.WriteFile(garbage, []byte("nope"), 0o644)
	bundle := filepath.Join(dir, "bundle.json")
	os.WriteFile(bundle, []byte(`{"version":1,"host":{},"snapshots":[{}]}`), 0o644)
	for _, args := range [][]string{{"compare", before}, {"compare", before, garbage}, {"compare", before, bundle}, {"compare", before, filepath.Join(dir, "none.json")}} {
		if code, _, stderr := runCLI(t, args...); code != ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line and exit 2", args, code, stderr)
		}
	}
}

// TestCompareChecks: two check reports compare their findings (no load
// table); a check against a run matches findings without their side and
// leaves out what only a run shows.
func TestCompareChecks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	before := write("before.json", `{"version":1,"command":"check","verdict":"UNHEALTHY: Accept queue overflow","findings":[
		{"id":"accept-queue-overflow","severity":"critical","status":"active","title":"Accept queue overflow","subject":"127.0.0.1:80"},
		{"id":"risky-sysctl","severity":"warning","status":"latent","title":"tcp_tw_reuse","subject":"net.ipv4.tcp_tw_reuse"}]}`)
	after := write("after.json", `{"version":1,"command":"check","verdict":"DEGRADED: Conntrack","findings":[
		{"id":"conntrack-table-full","severity":"warning","status":"active","title":"Conntrack 85% full"},
		{"id":"risky-sysctl","severity":"warning","status":"latent","title":"tcp_tw_reuse","subject":"net.ipv4.tcp_tw_reuse"}]}`)
	code, stdout, stderr := runCLI(t, "compare", before, after)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Status: unhealthy → degraded",
		"Findings gone:\n  [critical active] Accept queue overflow (accept-queue-overflow)",
		"Findings new:\n  [warning active] Conntrack 85% full (conntrack-table-full)",
		"Findings in both:\n  [warning latent] tcp_tw_reuse (risky-sysctl)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare of two checks lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "requests/s") {
		t.Errorf("compare of two checks shows a load table:\n%s", stdout)
	}

	run := write("run.json", `{"version":1,"command":"run","verdict":"UNHEALTHY: x","findings":[
		{"id":"accept-queue-overflow","severity":"critical","status":"active","title":"Accept queue overflow","subject":"127.0.0.1:80","side":"server"},
		{"id":"unexplained-distress","severity":"critical","status":"active","title":"The load shows distress","side":"client"}],
		"load":{"rps":100,"requests":1000,"status":{"2xx":1000},"errors":{},"latency":{}}}`)
	code, stdout, stderr = runCLI(t, "compare", run, after)
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"Load: only " + run + " has one (run vs check report)",
		"Findings gone:\n  [critical active] Accept queue overflow (accept-queue-overflow)",
		"Not compared with the check report (only a run's load and servers show them): unexplained-distress"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare of a run and a check lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = runCLI(t, "compare", run, before)
	if code != ExitOK || !strings.Contains(stdout, "Findings in both:\n  [critical active] Accept queue overflow") {
		t.Errorf("a run's server-side finding does not match the check's same finding:\n%s", stdout)
	}
}

// TestCompareRegression: a finding latent before and active after is one
// change, not one gone and one new, and it fails the comparison (exit
// 1): what a CI gate needs. A finding that got better passes; --fail-on
// moves the line as for the other commands.
func TestCompareRegression(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	latent := write("latent.json", `{"version":2,"command":"check","status":"latent","verdict":"LATENT: OK now, 1 latent risk(s) that will hurt at scale","findings":[
		{"id":"accept-queue-overflow","severity":"warning","status":"latent","title":"Listener 127.0.0.1:80 has an accept queue of only 5","subject":"127.0.0.1:80"}]}`)
	active := write("active.json", `{"version":2,"command":"check","status":"unhealthy","verdict":"UNHEALTHY: Accept queue overflow","findings":[
		{"id":"accept-queue-overflow","severity":"critical","status":"active","title":"Accept queue overflow","subject":"127.0.0.1:80"},
		{"id":"dns-slow","severity":"warning","status":"active","title":"Slow lookups"}]}`)
	code, stdout, stderr := runCLI(t, "compare", latent, active)
	if code != ExitFindings || stderr != "netdoctor: regression: accept-queue-overflow 127.0.0.1:80 is active in "+active+", not so in "+latent+"\n" {
		t.Errorf("exit %d, stderr %q; want %d and the regression named", code, stderr, ExitFindings)
	}
	for _, want := range []string{"Findings gone:\n  none", "Findings new:\n  [warning active] Slow lookups (dns-slow)",
		"Findings changed:\n  [warning latent → critical active] Accept queue overflow (accept-queue-overflow)"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("compare lacks %q:\n%s", want, stdout)
		}
	}
	if code, _, _ := runCLI(t, "compare", active, latent); code != ExitOK {
		t.Errorf("better after: exit %d, want 0", code)
	}
	if code, _, _ := runCLI(t, "compare", "--fail-on", "never", latent, active); code != ExitOK {
		t.Errorf("--fail-on never: exit %d, want 0", code)
	}
	// Only a new warning: a regression at --fail-on warning only.
	onlyWarn := write("warn.json", `{"version":2,"command":"check","findings":[
		{"id":"accept-queue-overflow","severity":"warning","status":"latent","title":"x","subject":"127.0.0.1:80"},
		{"id":"dns-slow","severity":"warning","status":"active","title":"Slow lookups"}]}`)
	if code, _, _ := runCLI(t, "compare", latent, onlyWarn); code != ExitOK {
		t.Errorf("a new warning, --fail-on critical: exit %d, want 0", code)
	}
	if code, _, stderr := runCLI(t, "compare", "--fail-on", "warning", latent, onlyWarn); code != ExitFindings || !strings.Contains(stderr, "dns-slow is active") {
		t.Errorf("a new warning, --fail-on warning: exit %d, %q; want 1", code, stderr)
	}
}
