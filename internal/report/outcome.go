package report

import "strings"

// Outcome is a report's verdict as one word, the report's "status": the
// verdict's first word, lower case, what a script tests instead of
// parsing the verdict's sentence (docs/report.md lists each with its
// sentence).
type Outcome string

// Outcomes, from the verdict's forms: the verdict is always
// "WORD: sentence", and the status is the word.
const (
	// OutcomeHealthy: "HEALTHY: no problem found".
	OutcomeHealthy Outcome = "healthy"
	// OutcomeLatent: "LATENT: OK now, N latent risk(s) that will hurt at
	// scale".
	OutcomeLatent Outcome = "latent"
	// OutcomeDegraded: "DEGRADED: TITLE", active warnings and no active
	// critical finding.
	OutcomeDegraded Outcome = "degraded"
	// OutcomeUnhealthy: "UNHEALTHY: TITLE", at least one active critical
	// finding that names a cause.
	OutcomeUnhealthy Outcome = "unhealthy"
	// OutcomeUnexplained: "UNEXPLAINED: The load shows distress that no
	// finding explains: …", the load was in distress and no finding
	// explains it (the only active critical finding is
	// UnexplainedDistress).
	OutcomeUnexplained Outcome = "unexplained"
	// OutcomeIncomplete: "INCOMPLETE: fewer than two snapshots, …".
	OutcomeIncomplete Outcome = "incomplete"
	// OutcomePartial: "PARTIAL: VERDICT (on the S side's evidence up to
	// T, …)", a run whose side's evidence stopped midway: the findings
	// rest on what came before.
	OutcomePartial Outcome = "partial"
)

// Outcomes lists every outcome, in the order docs/report.md does.
var Outcomes = []Outcome{OutcomeHealthy, OutcomeLatent, OutcomeDegraded, OutcomeUnhealthy, OutcomeUnexplained, OutcomeIncomplete, OutcomePartial}

// Word is the outcome as its verdict's first word: "UNHEALTHY".
func (o Outcome) Word() string { return strings.ToUpper(string(o)) }

// UnexplainedDistress is the finding of a load in distress that no
// other finding explains (internal/rules declares it under the same name).
const UnexplainedDistress FindingID = "unexplained-distress"

// criticalOutcome tells an active critical finding that names a cause
// from unexplained distress alone.
func criticalOutcome(fs []Finding) Outcome {
	for _, f := range fs {
		if f.Hurts() && f.ID != UnexplainedDistress {
			return OutcomeUnhealthy
		}
	}
	return OutcomeUnexplained
}

// v1Outcomes are the status words of version 1 reports that changed.
var v1Outcomes = map[Outcome]Outcome{"warnings": OutcomeDegraded, "findings": OutcomeUnhealthy}

// OutcomeOf derives the outcome of a report from its verdict and
// findings: the verdict's word, or for a report written before the
// verdict began with it (version 1) the word its sentence meant; ""
// when the verdict is none netdoctor writes.
func OutcomeOf(verdict string, fs []Finding) Outcome {
	word, _, _ := strings.Cut(verdict, ": ")
	for _, o := range Outcomes {
		if word == o.Word() {
			if o == OutcomeUnhealthy {
				return criticalOutcome(fs) // version 1 said UNHEALTHY for both
			}
			return o
		}
	}
	switch {
	case strings.HasPrefix(verdict, "OK now, "):
		return OutcomeLatent
	case strings.HasPrefix(verdict, "incomplete: "):
		return OutcomeIncomplete
	}
	return ""
}
