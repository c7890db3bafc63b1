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
	check := filepath.Join(dir, "check.json")
	os.WriteFile(check, []byte(`{"version":1,"command":"check","findings":[]}`), 0o644)
	for _, args := range [][]string{{"compare", before}, {"compare", before, garbage}, {"compare", before, check}, {"compare", before, filepath.Join(dir, "none.json")}} {
		if code, _, stderr := runCLI(t, args...); code != ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line and exit 2", args, code, stderr)
		}
	}
}
