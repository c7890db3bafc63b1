package tune

import (
	"strings"
	"testing"
)

// TestReadPlanBad: neither a plan nor a report is read from input that
// is not one (a report of the plan's version, too).
func TestReadPlanBad(t *testing.T) {
	for _, s := range []string{"", "{", `{"version": 2}`, `{"version": 1, "changes": [{"kind": "sysctl"}]}`, `{"version": 1, "changes": [{"kind": "rm -rf", "file": {}}]}`, `{"version": 1, "findings": []}`} {
		if _, err := ReadPlan(strings.NewReader(s)); err == nil {
			t.Errorf("%q: accepted", s)
		}
	}
	for _, s := range []string{"", "[]", `{"version": 1, "command": "load"}`} {
		if _, err := ReadInput(strings.NewReader(s)); err == nil {
			t.Errorf("report %q: accepted", s)
		}
	}
}
