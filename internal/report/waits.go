package report

import "time"

// Waits is where the load's requests waited outside the servers' own
// work, per request of the load, from the servers' full pools of
// workers and their dependencies' connections: typed data for the
// latency split (what falls outside the servers' threads: queued for a
// worker, in a dependency, on the network).
type Waits struct {
	// Pools are the full pools of workers requests waited for.
	Pools []PoolWait `json:"pools,omitempty"`
	// Dependencies are the legs from the run's servers to what they
	// depend on, each timed from its traced connections.
	Dependencies []DependencyWait `json:"dependencies,omitempty"`
}

// PoolWait is a full pool of workers and Little's law on it.
type PoolWait struct {
	// Server is "kind addr"; Threads the pool's threads ("pool-1-thread-*").
	Server  string `json:"server"`
	Threads string `json:"threads"`
	Size    int    `json:"size"`
	// Busy is the workers busy on average over the load.
	Busy float64 `json:"busy"`
	// Service is the time a request held a worker (Busy over the rate);
	// Wait the rest of the mean latency, waiting for one (and whatever
	// else the request did outside the pool).
	Service time.Duration `json:"service_ns"`
	Wait    time.Duration `json:"wait_ns"`
}

// DependencyWait is one leg from a server to a dependency, per request
// of the load.
type DependencyWait struct {
	Server string `json:"server"`
	Addr   string `json:"addr"`
	// Conns and Busy are the pool's connections and their busy share.
	Conns int     `json:"conns"`
	Busy  float64 `json:"busy"`
	// RoundTrips are the leg's round trips per request of the load.
	RoundTrips float64 `json:"round_trips"`
	// Time is the leg's time per request: its round trips times the time
	// each took, from the request's send to its answer's end (network
	// included). Network is the network's share of it (the round trips
	// times the lowest RTT the kernel sampled), Stall the share a
	// delayed ACK held back (Nagle's algorithm, from the looks at which
	// data waited for it).
	Time    time.Duration `json:"time_ns"`
	Network time.Duration `json:"network_ns"`
	Stall   time.Duration `json:"stall_ns,omitempty"`
	// ConnWait is, for a pool busy all the time (Busy ≥ 0.8), the mean
	// latency beyond Time: waiting for a connection, with the server's
	// own work in it (an upper bound on the wait).
	ConnWait time.Duration `json:"conn_wait_ns,omitempty"`
}
