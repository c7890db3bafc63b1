// Package rules turns evidence into findings. Every rule registers
// itself (register) in its own file (listen.go, conntrack.go,
// workerpool.go…): a function of an Input, with the constants of the
// finding IDs it makes and their classes (define), which say everything
// else a finding needs; active findings rest on something that changed
// or happened during the window, latent ones on settings and levels.
// One diagnosis (diagnose.go: passes) serves every command: the rules,
// then the passes that look across findings — the baseline, the
// throughput's shape, causes before their symptoms, the share of the
// failed requests each cause explains — which add what they find as
// data. Diagnose runs it over a run, CheckHost over a namespace's bundle
// (check, diagnose, the agent), where the passes that need a run do
// nothing. Finding IDs are stable and listed in docs/findings.md;
// docs/architecture.md shows how to add a rule.
package rules
