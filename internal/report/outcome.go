package report

import "strings"

// Outcome is a report's verdict as one word, the report's "status":
// what a script tests instead of parsing the verdict's sentence
// (docs/report.md lists each with its sentence).
type Outcome string

// Outcomes, from the verdict's forms.
const (
	// OutcomeHealthy: "HEALTHY: no problem found".
	OutcomeHealthy Outcome = "healthy"
	// OutcomeLatent: "OK now, N latent risk(s) that will hurt at scale".
	OutcomeLatent Outcome = "latent"
	// OutcomeWarnings: "DEGRADED: TITLE", active warnings and no active
	// critical finding.
	OutcomeWarnings Outcome = "warnings"
	// OutcomeFindings: "UNHEALTHY: TITLE", at least one active critical
	// finding that names a cause.
	OutcomeFindings Outcome = "findings"
	// OutcomeUnexplained: "UNHEALTHY: The load shows distress that no
	// finding explains: …", the load was in distress and no finding
	// explains it (the only active critical finding is
	// UnexplainedDistress).
	OutcomeUnexplained Outcome = "unexplained"
	// OutcomeIncomplete: "incomplete: fewer than two snapshots, …".
	OutcomeIncomplete Outcome = "incomplete"
	// OutcomePartial: "PARTIAL: VERDICT (on the S side's evidence up to
	// T, …)", a run whose side's evidence stopped midway: the findings
	// rest on what came before.
	OutcomePartial Outcome = "partial"
)

// Outcomes lists every outcome, in the order docs/report.md does.
var Outcomes = []Outcome{OutcomeHealthy, OutcomeLatent, OutcomeWarnings, OutcomeFindings, OutcomeUnexplained, OutcomeIncomplete, OutcomePartial}

// UnexplainedDistress is the finding of a load in distress that no
// other finding explains (internal/rules declares it under the same name).
const UnexplainedDistress FindingID = "unexplained-distress"

// criticalOutcome tells an active critical finding that names a cause
// from unexplained distress alone.
func criticalOutcome(fs []Finding) Outcome {
	for _, f := range fs {
		if f.Hurts() && f.ID != UnexplainedDistress {
			return OutcomeFindings
		}
	}
	return OutcomeUnexplained
}

// OutcomeOf derives the outcome of a report that has none (written
// before reports had a status) from its verdict and findings; "" when
// the verdict is none netdoctor writes.
func OutcomeOf(verdict string, fs []Finding) Outcome {
	switch {
	case strings.HasPrefix(verdict, "PARTIAL: "):
		return OutcomePartial
	case strings.HasPrefix(verdict, "UNHEALTHY: "):
		return criticalOutcome(fs)
	case strings.HasPrefix(verdict, "DEGRADED: "):
		return OutcomeWarnings
	case strings.HasPrefix(verdict, "OK now, "):
		return OutcomeLatent
	case strings.HasPrefix(verdict, "HEALTHY: "):
		return OutcomeHealthy
	case strings.HasPrefix(verdict, "incomplete: "):
		return OutcomeIncomplete
	}
	return ""
}
