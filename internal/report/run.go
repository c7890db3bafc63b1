package report

import (
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
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
	LoadNotes []string      `json:"load_notes,omitempty"`
	Shape     Shape         `json:"shape"`
	Sides     []*RunSide    `json:"sides,omitempty"`
	Servers   []*app.Server `json:"servers,omitempty"`
	// Path is the path probe made before the load (run --server-agent).
	Path *PathProbe `json:"path,omitempty"`
	// Waits is where requests waited outside the servers' own work: for
	// a worker of a full pool, in each dependency, on the network.
	Waits *Waits `json:"waits,omitempty"`
	// Profile is the servers' on-CPU profile during the load, summed
	// up; ProfileError says why there is none.
	Profile      *cpuprof.Summary `json:"profile,omitempty"`
	ProfileError string           `json:"profile_error,omitempty"`
	// Flame is the profile's flame graph, for the HTML report only.
	Flame *cpuprof.Node `json:"-"`
}

// RunSide is one end of a run: where it was observed, or why not.
type RunSide struct {
	Name  Side   `json:"name"` // Server or Client
	NetNS string `json:"netns,omitempty"`
	// Observed is true when the side's kernel evidence was sampled.
	Observed bool   `json:"observed"`
	Why      string `json:"why,omitempty"`
	// SameAs names the side whose namespace this one shares: a server
	// reached at an address of the client's namespace is observed
	// through the client's snapshots, and its findings carry Local.
	SameAs Side `json:"same_as,omitempty"`
	// Agent is the URL of the agent the side's evidence came from, over
	// the network; its times are on this host's clock, moved by
	// ClockOffset (the agent's clock minus this host's, measured when
	// the run began, to within ClockUncertainty).
	Agent            string        `json:"agent,omitempty"`
	ClockOffset      time.Duration `json:"clock_offset_ns,omitempty"`
	ClockUncertainty time.Duration `json:"clock_uncertainty_ns,omitempty"`
	// Lost says why the side's evidence stopped before the run ended
	// (its agent became unreachable), and LostAt the time of the last
	// snapshot it gave: the report rests on what came before.
	Lost   string    `json:"lost,omitempty"`
	LostAt time.Time `json:"lost_at,omitzero"`
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
