// Package agentapi is the wire contract of `netdoctor agent`'s evidence
// API, version 2 (docs/agent.md): the paths, the query parameters and
// the JSON bodies the agent serves and the remote source reads. Both
// sides import it, so they cannot drift apart; a change that breaks a
// reader gets a new version prefix, not an edit here.
package agentapi

import (
	"encoding/json"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Version is the API version, the number in every path's prefix.
// Version 2 serves snapshots in bundle version 2's names (counters as
// nstat names them, a listener's accept_queue and backlog), which a
// reader of version 1 would misread: it is refused by its prefix.
const Version = 2

// Paths. Everything under Prefix needs the bearer token; Metrics and
// Healthz are open, like any exporter's.
const (
	Prefix        = "/api/v2/"
	PathHost      = Prefix + "host"      // GET: HostInfo
	PathSnapshot  = Prefix + "snapshot"  // GET: one snapshot taken now
	PathSnapshots = Prefix + "snapshots" // GET ?since=&wait=: Window
	PathFindings  = Prefix + "findings"  // GET: the current diagnosis, Findings
	PathServers   = Prefix + "servers"   // GET ?port=&dns=&dns_after=: a new Watch
	PathWatch     = Prefix + "watch/"    // GET watch/ID?since=&finish=&load=: Watch
	PathProfile   = Prefix + "profile"   // GET ?port=&seconds=&hz=&format=: an on-CPU profile of the servers behind port
	PathMetrics   = "/metrics"
	PathHealthz   = "/healthz"
)

// Limits a client can rely on.
const (
	// MaxWait is the longest a snapshots request waits for a new one.
	MaxWait = 30 * time.Second
	// MaxSnapshots is the most snapshots one Window carries; More says
	// there are others after them.
	MaxSnapshots = 64
	// WatchTTL is how long a watch lives without a request for it.
	WatchTTL = time.Minute
	// MaxWatches is how many watches the agent keeps at once.
	MaxWatches = 8
)

// HostInfo is what the agent observes and how, and its clock: a client
// measures the offset between the two hosts' clocks from Time and the
// request's round trip.
type HostInfo struct {
	API      int           `json:"api"`
	Agent    string        `json:"agent"` // netdoctor's version
	Host     evidence.Host `json:"host"`
	Time     time.Time     `json:"time"`
	Interval time.Duration `json:"interval_ns"`
	Retain   time.Duration `json:"retain_ns"`
	// Oldest is the time of the oldest snapshot the agent still holds.
	Oldest time.Time `json:"oldest,omitzero"`
	// TestEndpoint is the address (HOST:PORT, as the agent listens) of
	// its layer-test endpoint, TCP and UDP; "" when it offers none.
	TestEndpoint string `json:"test_endpoint,omitempty"`
}

// Window is the snapshots taken after a time, oldest first, as the agent
// took them (RawMessage: the agent serves what it stored, undecoded).
type Window struct {
	// Now is the agent's clock when it answered.
	Now       time.Time         `json:"now"`
	Snapshots []json.RawMessage `json:"snapshots"`
	// More is true when there are more snapshots after the last one:
	// ask again with since set to its time.
	More bool `json:"more,omitempty"`
	// Gap is true when since is older than the oldest snapshot held:
	// some of what was asked for was dropped by the retention.
	Gap bool `json:"gap,omitempty"`
}

// Watch is the servers behind one port, sampled every second for the
// client that asked, until it finishes the watch or stops asking.
//
// The agent also traces the servers' outbound connections every 100 ms
// (app.Observer.TraceDeps), from the watch's opening until its finish.
// A client that drives a load says when it starts and ends with
// load=start and load=end on a watch request: the trace begins again at
// the start and stops at the end. Agents before this ignore the
// parameter and return no dependencies; clients before it never send it
// and get dependencies over the watch's whole life.
type Watch struct {
	ID   string `json:"id"`
	Port int    `json:"port"`
	// Servers carry the samples taken after the request's since; on
	// finish, every sample, what the logs gained since the watch
	// began and the dependencies traced (Server.Deps). Servers found
	// by the trace (role "dependency") join the list.
	Servers []*app.Server `json:"servers"`
	Now     time.Time     `json:"now"`
}

// Findings is the agent's current diagnosis: a check report over its
// recent window.
type Findings = report.Report

// Error is the body of every error response.
type Error struct {
	Error string `json:"error"`
}
