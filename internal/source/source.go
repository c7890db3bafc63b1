// Package source is where one side's evidence comes from: the kernel's
// counters, sockets and settings of a network namespace, and the
// applications behind a port with their workers. Local is a namespace on
// this host; a remote agent will serve the same over the network. run,
// check and collect sample through it (Sample, Record), so a new source
// of evidence plugs in under all of them at once.
package source

import (
	"context"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/collect"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// Source gives one side's evidence.
type Source interface {
	// Host says where the evidence comes from: host, kernel, namespace.
	Host() evidence.Host
	// Snapshot runs every collector once. It never fails: each
	// collector's outcome is in the snapshot's Status.
	Snapshot(ctx context.Context) evidence.Snapshot
	// Discover finds the servers behind a TCP port, and the upstreams
	// they send to, from the listeners of one snapshot; nil when nothing
	// the source can see owns the port.
	Discover(ctx context.Context, port int) Apps
	// Stream is the source's own stream of snapshots when it samples by
	// itself (Remote), which Record follows instead of asking for each;
	// nil when it samples only when asked (Local).
	Stream() Streamer
	// Close releases what the source holds.
	Close() error
}

// Apps watches the servers behind a port.
type Apps interface {
	// Sample records one second of every server's workers: how many,
	// and what each thread waits on.
	Sample(ctx context.Context)
	// Last is every server's latest sample. It must not be called while
	// Sample runs.
	Last() []app.Sample
	// Finish reads what the servers' logs gained since discovery and
	// returns the servers with their samples.
	Finish() []*app.Server
	// TraceDeps follows the servers' connections to what they depend
	// on until ctx ends (a Local's are looked at every app.DepInterval,
	// a Remote's by its agent); the dependencies come with Finish.
	TraceDeps(ctx context.Context) error
	// Processes names the server each of the servers' processes on
	// this host belongs to, for an on-CPU profile to keep their
	// samples; empty when the servers are observed through an agent.
	Processes() map[int]string
}

// Local is a network namespace of this host.
type Local struct {
	snap *collect.Snapshotter
	ns   netns.NS
}

// NewLocal prepares the collectors for cfg.NetNS. It fails only when
// the namespace cannot be entered. Callers must Close it.
func NewLocal(cfg collect.Config) (*Local, error) {
	s, err := collect.New(cfg)
	if err != nil {
		return nil, err
	}
	return &Local{snap: s, ns: cfg.NetNS}, nil
}

// Host implements Source.
func (l *Local) Host() evidence.Host { return l.snap.Host }

// Snapshot implements Source.
func (l *Local) Snapshot(ctx context.Context) evidence.Snapshot { return l.snap.Snapshot(ctx) }

// Discover implements Source: the owners of the listener, found through
// /proc, their configuration through the servers' own binaries.
func (l *Local) Discover(ctx context.Context, port int) Apps {
	snap := l.snap.Snapshot(ctx)
	if snap.Sockets == nil {
		return nil
	}
	return app.Discover(ctx, snap.Sockets.Listeners, port, l.ns)
}

// Stream implements Source: a namespace here is sampled when asked.
func (l *Local) Stream() Streamer { return nil }

// Close implements Source.
func (l *Local) Close() error {
	l.snap.Close()
	return nil
}

// NS is the namespace the source observes.
func (l *Local) NS() netns.NS { return l.ns }
