package report_test

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestOutcome: each verdict's form has its status, New sets it, and
// OutcomeOf derives the same one from the sentence alone, as Read does
// for a report written before reports had a status.
func TestOutcome(t *testing.T) {
	two := &evidence.Bundle{Snapshots: make([]evidence.Snapshot, 2)}
	crit := report.Finding{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Title: "Accept queue overflow"}
	distress := report.Finding{ID: report.UnexplainedDistress, Severity: report.Critical, Status: report.Active, Title: "The load shows distress that no finding explains: x"}
	warn := report.Finding{ID: "dns-slow", Severity: report.Warning, Status: report.Active, Title: "slow"}
	latent := report.Finding{ID: "risky-sysctl", Severity: report.Warning, Status: report.Latent, Title: "risky"}
	for _, c := range []struct {
		name   string
		b      *evidence.Bundle
		fs     []report.Finding
		want   report.Outcome
		prefix string
	}{
		{"healthy", two, nil, report.OutcomeHealthy, "HEALTHY: "},
		{"latent", two, []report.Finding{latent}, report.OutcomeLatent, "LATENT: OK now, 1 latent risk(s)"},
		{"degraded", two, []report.Finding{warn, latent}, report.OutcomeDegraded, "DEGRADED: slow"},
		{"unhealthy", two, []report.Finding{crit, warn}, report.OutcomeUnhealthy, "UNHEALTHY: Accept queue overflow"},
		{"unhealthy and distress", two, []report.Finding{distress, crit}, report.OutcomeUnhealthy, "UNHEALTHY: The load shows distress"},
		{"unexplained", two, []report.Finding{distress, warn}, report.OutcomeUnexplained, "UNEXPLAINED: The load shows distress"},
		{"incomplete", &evidence.Bundle{Snapshots: make([]evidence.Snapshot, 1)}, nil, report.OutcomeIncomplete, "INCOMPLETE: "},
	} {
		r := report.New("check", c.b, c.fs)
		if r.Status != c.want || !strings.HasPrefix(r.Verdict, c.prefix) {
			t.Errorf("%s: status %q, verdict %q; want %q, %q…", c.name, r.Status, r.Verdict, c.want, c.prefix)
		}
		if got := report.OutcomeOf(r.Verdict, r.Findings); got != c.want {
			t.Errorf("%s: OutcomeOf(%q) = %q, want %q", c.name, r.Verdict, got, c.want)
		}
		// One vocabulary: the status is the verdict's first word.
		if word, _, _ := strings.Cut(r.Verdict, ": "); word != strings.ToUpper(string(r.Status)) {
			t.Errorf("%s: status %q, verdict %q: not its word", c.name, r.Status, r.Verdict)
		}
	}
	if got := report.OutcomeOf("PARTIAL: UNHEALTHY: x (on the server side's evidence up to 10:00:00, when its agent stopped answering)", nil); got != report.OutcomePartial {
		t.Errorf("OutcomeOf(PARTIAL…) = %q", got)
	}
}

// TestReadOldStatus: a report written before the status field reads
// with the status its verdict says, and version 1's words ("warnings",
// "findings") read as version 2's; a written one is kept.
func TestReadOldStatus(t *testing.T) {
	for in, want := range map[string]report.Outcome{
		`{"version":1,"command":"check","verdict":"DEGRADED: slow","findings":[]}`:                                                                    report.OutcomeDegraded,
		`{"version":1,"command":"check","verdict":"DEGRADED: slow","status":"warnings","findings":[]}`:                                                report.OutcomeDegraded,
		`{"version":1,"command":"check","verdict":"UNHEALTHY: x","status":"findings","findings":[]}`:                                                  report.OutcomeUnhealthy,
		`{"version":1,"command":"check","verdict":"OK now, 2 latent risk(s) that will hurt at scale","findings":[]}`:                                  report.OutcomeLatent,
		`{"version":1,"command":"run","verdict":"HEALTHY: no problem found","findings":[]}`:                                                           report.OutcomeHealthy,
		`{"version":1,"command":"diagnose","verdict":"HEALTHY: no problem found","status":"partial"}`:                                                 report.OutcomePartial,
		`{"version":1,"command":"check","verdict":"UNHEALTHY: x","findings":[{"id":"unexplained-distress","severity":"critical","status":"active"}]}`: report.OutcomeUnexplained,
	} {
		r, err := report.Read(strings.NewReader(in))
		if err != nil || r.Status != want {
			t.Errorf("Read(%s): status %v, %v; want %q", in, r, err, want)
		}
	}
}
