package report

import (
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// Run is the report of `run`: the report of its server side's window
// (verdict, findings, host summary; the client's when the server was not
// observed) plus the load's result, the throughput's shape, the sides and
// the servers behind the port. Read also reads a check, diagnose or load
// report into it, without the parts those do not have.
type Run struct {
	*Report
	Load *load.Result `json:"load,omitempty"`
	// LoadNotes say what the load did to the client's side: a new
	// connection per request or kept ones, and the local ports they took.
	LoadNotes []string             `json:"load_notes,omitempty"`
	Shape     Shape                `json:"shape"`
	Sides     []*evidence.SideInfo `json:"sides,omitempty"`
	Servers   []*app.Server        `json:"servers,omitempty"`
	// Path is the path probe made before the load (run --server-agent).
	Path *evidence.PathProbe `json:"path,omitempty"`
	// Waits is where requests waited outside the servers' own work: for
	// a worker of a full pool, in each dependency, on the network.
	Waits *Waits `json:"waits,omitempty"`
	// Flame is the profile's flame graph, for the HTML report only.
	Flame *cpuprof.Node `json:"-"`
}

// Shape is what the per-second throughput did during the load.
type Shape struct {
	// Pattern is "steady", "saw-tooth" (throughput collapses and recovers
	// again and again, seed 002) or "step" (it moves to another level and
	// stays).
	Pattern string `json:"pattern"`
	// Seconds are the load seconds where throughput collapsed (saw-tooth)
	// or the first second of the new level (step).
	Seconds []int `json:"seconds,omitempty"`
	// MovedWith names the counters whose per-second rate rose in those
	// seconds and not in the others: the likely cause.
	MovedWith []string `json:"moved_with,omitempty"`
	Text      string   `json:"text"`
}
