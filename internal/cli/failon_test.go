package cli

import (
	"strings"
	"testing"
)

// TestFailOn: --fail-on says which active findings exit 1: critical
// ones by default, warnings too with warning, none with never; a bad
// level is bad input.
func TestFailOn(t *testing.T) {
	const (
		critical = "../../testdata/bundles/accept-overflow.json"                // an active critical finding
		warnings = "../../testdata/runs/kv-redis.bundle.json.gz"                // active warnings only
		healthy  = "../../testdata/runs/dns-slow-resolver.fixed.bundle.json.gz" // nothing active
	)
	for _, c := range []struct {
		bundle, failOn string
		want           int
	}{
		{critical, "", ExitFindings},
		{critical, "critical", ExitFindings},
		{critical, "warning", ExitFindings},
		{critical, "never", ExitOK},
		{warnings, "", ExitOK},
		{warnings, "critical", ExitOK},
		{warnings, "warning", ExitFindings},
		{warnings, "never", ExitOK},
		{healthy, "warning", ExitOK},
	} {
		args := []string{"diagnose", c.bundle, "--json", "-"}
		if c.failOn != "" {
			args = append(args, "--fail-on", c.failOn)
		}
		if code, _, stderr := runCLI(t, args...); code != c.want {
			t.Errorf("%v: exit %d, want %d\n%s", args, code, c.want, stderr)
		}
	}
	if code, _, stderr := runCLI(t, "check", "--fail-on", "sometimes"); code != ExitUsage || !strings.Contains(stderr, "want critical, warning or never") {
		t.Errorf("check --fail-on sometimes: exit %d, stderr %q", code, stderr)
	}
}
