package cli

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab/labrun"
)

// TestLabExitFindings: the lab takes a run's exit code for active
// critical findings as success; it must be the one netdoctor exits with.
func TestLabExitFindings(t *testing.T) {
	if labrun.ExitFindings != ExitFindings {
		t.Errorf("labrun.ExitFindings = %d, ExitFindings = %d", labrun.ExitFindings, ExitFindings)
	}
}
