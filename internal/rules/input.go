package rules

import (
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Input is the evidence one rule examines.
type Input struct {
	// Bundle is one namespace's snapshots over the window the findings
	// rest on: for check and diagnose all of them, for a run from the
	// last snapshot before the load to the end of the tail. PerSide and
	// PerHost rules read it; it is nil for the others.
	Bundle *evidence.Bundle
	// Side is which end of a run Bundle is: "" for check and diagnose.
	Side report.Side
	// Run is what a run observed besides the kernel: the load, the
	// servers behind the port, both sides (evidence.Run, what `run
	// --bundle` writes). nil for check and diagnose.
	Run *evidence.Run
	// Found is what every other rule found: for Symptom rules only.
	Found []report.Finding
	// Shape is the run's throughput over time: for PerRun and Symptom
	// rules.
	Shape report.Shape
	// Clean is, for Symptom rules, what the other rules looked at and
	// found nothing active in (their Checks); Rose what they looked at
	// that rose without reaching a finding, with the counters.
	Clean []string
	Rose  []string
	// Traced is, without a run, the dependencies check and the agent
	// traced under the host's own traffic: for the rules that judge
	// them (Rule.Traced).
	Traced *evidence.Traced
	// Profile is, without a run, check's on-CPU profile of the servers
	// behind the namespace's listeners (Rule.Profiled).
	Profile *evidence.HostProfile
}

// Load is the run's load result, or nil outside a run.
func (in *Input) Load() *load.Result {
	if in.Run == nil {
		return nil
	}
	return in.Run.Load
}

// Servers are the servers whose evidence this input holds: in a run,
// every server for run rules and for the server's side, none for the
// client's; none outside a run.
func (in *Input) Servers() []*app.Server {
	if in.Run == nil || in.Side == report.Client {
		return nil
	}
	return in.Run.Servers
}

// ServerSide reports whether the input's bundle is a run's server side
// (or both sides in one namespace).
func (in *Input) ServerSide() bool {
	return in.Run != nil && (in.Side == report.Server || in.Side == report.Local)
}

// serverBundle is the server side's snapshots, from the baseline to the
// tail; nil when the server was not observed.
func serverBundle(r *evidence.Run) *evidence.Bundle {
	if s := r.Server(); s != nil {
		return s.Bundle
	}
	return nil
}
