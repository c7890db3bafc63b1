// Package rules turns evidence into findings. Every rule is in Registry:
// one file per rule (listen.go, conntrack.go, workerpool.go…), a function
// of an Input, with the constants of the finding IDs it makes; active
// findings rest on something that changed or happened during the window,
// latent ones on settings and levels. Check runs the rules that read one
// namespace (check, diagnose); Diagnose runs all of them over a run and
// then the steps that look across findings: the baseline, the
// throughput's shape, causes before their symptoms, and the share of the
// failed requests each cause explains. Finding IDs are stable and listed
// in docs/findings.md; docs/architecture.md shows how to add a rule.
package rules
