package cli

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
)

// TestLabExitFindings: the lab takes a run's exit code for active
// critical findings as success; it must be the one netdoctor exits with.
func TestLabExitFindings(t *testing.T) {
	if lab.ExitFindings != ExitFindings {
		t.Errorf("lab.ExitFindings = %d, ExitFindings = %d", lab.ExitFindings, ExitFindings)
	}
}
