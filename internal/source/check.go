package source

import (
	"context"
	"os"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/pace"
)

// TraceHost follows the outbound connections of the servers behind
// listeners (at most maxPorts ports) until ctx ends, through their
// Apps.TraceDeps as a run's trace does, and returns what they showed:
// the production traffic's dependencies, without a load. netdoctor's own
// connections are not followed. check and the agent's bursts trace
// through it.
func (l *Local) TraceHost(ctx context.Context, listeners []evidence.Listener, maxPorts int) (*evidence.Traced, error) {
	self := os.Getpid()
	start := time.Now()
	servers, n, err := app.TraceHost(ctx, listeners, l.ns, maxPorts, func(pid int) bool { return pid == self })
	if err != nil {
		return nil, err
	}
	return &evidence.Traced{Start: start, Seconds: time.Since(start).Seconds(), IntervalMS: int(app.DepInterval / time.Millisecond), Servers: servers, Followed: n}, nil
}

// Checked is check's evidence of a namespace: two snapshots a window
// apart, and the dependencies its servers showed in between.
type Checked struct {
	Bundle *evidence.Bundle
	// Traced is nil when the sockets were not listed or the trace
	// failed (TraceErr says why).
	Traced   *evidence.Traced
	TraceErr error
	// Profile is the servers' profile over the window, with or without
	// the trace; nil when none was asked for.
	Profile *evidence.HostProfile
	// Interrupted: ctx ended before the window did, and the second
	// snapshot was taken then.
	Interrupted bool
}

// Check takes a snapshot, follows the dependencies of the servers
// behind its listeners (at most maxPorts ports) for window, profiling
// their CPU at profileHz (none at 0), and takes the second snapshot:
// the two ticks of a pace.Ticker a window apart. started, when set, is
// called as the window begins. The second snapshot is taken even when
// ctx ends first: a short window is still evidence.
func (l *Local) Check(ctx context.Context, window time.Duration, maxPorts, profileHz int, started func()) *Checked {
	ticks := pace.New(window)
	ticks.Next(context.WithoutCancel(ctx)) // the first, due now
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: l.Host(), Start: time.Now()}
	b.Snapshots = append(b.Snapshots, l.Snapshot(ctx))
	traceCtx, stopTrace := context.WithCancel(context.WithoutCancel(ctx))
	type traced struct {
		tr  *evidence.Traced
		err error
	}
	ch := make(chan traced, 1)
	prof := &profiled{}
	if socks := b.Snapshots[0].Sockets; socks == nil {
		ch <- traced{}
		prof.why = "the sockets were not listed: no server to profile"
	} else {
		go func() {
			tr, err := l.TraceHost(traceCtx, socks.Listeners, maxPorts)
			ch <- traced{tr, err}
		}()
		if profileHz > 0 {
			prof.start(socks.Listeners, maxPorts, profileHz)
		}
	}
	if started != nil {
		started()
	}
	c := &Checked{Bundle: b}
	_, ok := ticks.Next(ctx)
	c.Interrupted = !ok
	prof.stop()
	stopTrace()
	b.Snapshots = append(b.Snapshots, l.Snapshot(context.WithoutCancel(ctx)))
	tr := <-ch
	c.Traced, c.TraceErr = tr.tr, tr.err
	if profileHz > 0 {
		c.Profile = &evidence.HostProfile{Profile: prof.p, Servers: prof.servers, Error: prof.why}
	}
	return c
}

// profiled is check's on-CPU profile of the servers behind the
// namespace's listeners, as run's profile is of the servers behind its
// port: bounded the same way (cpuprof.Exclusive, the profiler's budgets).
type profiled struct {
	servers []*app.Server
	p       *cpuprof.Profile
	why     string
	prof    *cpuprof.Profiler
	done    func()
}

func (p *profiled) start(listeners []evidence.Listener, maxPorts, hz int) {
	self := os.Getpid()
	p.servers = app.Listening(listeners, maxPorts, func(pid int) bool { return pid == self })
	if len(p.servers) == 0 {
		p.why = "no server found behind the listeners: nothing to profile"
		return
	}
	servers := p.servers
	prof, done, err := cpuprof.Exclusive(cpuprof.Options{Hz: hz, Servers: func() map[int]string { return app.Processes(servers) }})
	if err != nil {
		p.why = err.Error()
		return
	}
	p.prof, p.done = prof, done
}

func (p *profiled) stop() {
	if p.prof == nil {
		return
	}
	p.p = p.prof.Stop()
	p.done()
	p.prof = nil
}
