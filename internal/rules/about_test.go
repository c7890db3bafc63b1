package rules

import (
	"os"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

// TestClassesMatchDocs: every finding ID has a Class, and each Class
// says what docs/findings.md's summary table says: the meaning word for
// word, whether it can be critical when active, and whether it has a
// latent form. Alerts and dashboards are built from Classes.
func TestClassesMatchDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/findings.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[report.FindingID][]string{}
	for _, l := range strings.Split(string(b), "\n") {
		cells := strings.Split(l, " | ")
		if len(cells) < 6 || !strings.HasPrefix(l, "| `") {
			continue
		}
		rows[report.FindingID(strings.Trim(cells[0], "| `"))] = cells[1:]
	}
	ids := map[report.FindingID]bool{}
	for _, r := range Registry {
		for _, id := range r.IDs {
			ids[id] = true
			if _, ok := Classes[id]; !ok {
				t.Errorf("%s: no Class", id)
			}
		}
	}
	for id, c := range Classes {
		if !ids[id] {
			t.Errorf("Class %s: no rule makes it", id)
		}
		row, ok := rows[id]
		if !ok {
			t.Errorf("%s: not in docs/findings.md's summary", id)
			continue
		}
		if row[0] != c.Meaning {
			t.Errorf("%s: meaning %q, docs say %q", id, c.Meaning, row[0])
		}
		if crit := strings.Contains(row[1], "critical"); crit != c.Critical {
			t.Errorf("%s: Critical %v, docs' active column %q", id, c.Critical, row[1])
		}
		latent := row[2] != "—" && !strings.HasPrefix(row[2], "none")
		if latent != c.Latent {
			t.Errorf("%s: Latent %v, docs' latent column %q", id, c.Latent, row[2])
		}
	}
}

// TestContinuous: the agent's diagnosis (no load) makes the kernel
// rules' findings and the traced dependencies', not those that need a
// run.
func TestContinuous(t *testing.T) {
	for id, want := range map[report.FindingID]bool{
		AcceptQueueOverflow: true, CPUSaturated: true, RiskySysctl: true, DependencyPoolSaturated: true, DependencySlow: true,
		WorkerPoolExhausted: false, NagleDelayedACK: false, UnexplainedDistress: false, LoadGeneratorSaturated: false,
	} {
		if got := Continuous(id); got != want {
			t.Errorf("Continuous(%s) = %v, want %v", id, got, want)
		}
	}
}
