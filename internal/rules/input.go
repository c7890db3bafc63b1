package rules

import (
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
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
	// servers behind the port, both sides. nil for check and diagnose.
	Run *Run
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
	Traced *report.Traced
}

// Run is everything a run observed; `run --bundle` writes it and
// `diagnose` reads it back, so it is JSON.
type Run struct {
	Load      *load.Result `json:"load"`
	LoadStart time.Time    `json:"load_start"`
	LoadEnd   time.Time    `json:"load_end"`
	// Port is the target's port: the front server's listener.
	Port    string        `json:"port"`
	Sides   []*Side       `json:"sides"`
	Servers []*app.Server `json:"servers,omitempty"`
	// Path is the path between the hosts as probed before the load,
	// nil when it was not.
	Path *report.PathProbe `json:"path,omitempty"`
	// Profile is the servers' on-CPU profile during the load, nil when
	// none was taken; ProfileError says why not.
	Profile      *cpuprof.Profile `json:"profile,omitempty"`
	ProfileError string           `json:"profile_error,omitempty"`
}

// Side is one end of a run with its snapshots, from the quiet baseline
// before the load to the end of the tail. A side that shares the other's
// namespace (SameAs) shares its Bundle.
type Side struct {
	report.RunSide
	Bundle *evidence.Bundle `json:"bundle,omitempty"`
}

// Window is the side's load window: its snapshots from the last one
// taken before the load started.
func (r *Run) Window(s *Side) *evidence.Bundle {
	if s == nil {
		return nil
	}
	return s.Bundle.From(r.LoadStart)
}

// Server is the observed server side, or nil.
func (r *Run) Server() *Side { return r.side(report.Server) }

// Client is the observed client side, or nil.
func (r *Run) Client() *Side { return r.side(report.Client) }

func (r *Run) side(name report.Side) *Side {
	for _, s := range r.Sides {
		if s.Name == name && s.Observed {
			return s
		}
	}
	return nil
}

// ServerSide is the side server findings carry: Local when the server
// shares the client's namespace.
func (r *Run) ServerSide() report.Side {
	for _, s := range r.Sides {
		if s.Name == report.Server && s.SameAs != "" {
			return report.Local
		}
	}
	return report.Server
}

// Serves reports whether a listener address is the run's target port or
// one of the servers behind it.
func (r *Run) Serves(addr string) bool {
	if strings.HasSuffix(addr, ":"+r.Port) {
		return true
	}
	for _, s := range r.Servers {
		if s.Addr == addr {
			return true
		}
	}
	return false
}

// Samples are a server's samples taken while the load ran.
func (r *Run) Samples(s *app.Server) []app.Sample {
	var out []app.Sample
	for _, smp := range s.Samples {
		if !smp.Time.Before(r.LoadStart) && !smp.Time.After(r.LoadEnd) {
			out = append(out, smp)
		}
	}
	return out
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
func (r *Run) serverBundle() *evidence.Bundle {
	if s := r.Server(); s != nil {
		return s.Bundle
	}
	return nil
}
