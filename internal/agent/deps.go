package agent

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/pace"
)

// Dependency tracing in bursts: every DepEvery the agent follows the
// outbound connections of the servers behind the listeners it follows
// (MaxPools ports) for depBurst, looking at each connection every
// app.DepInterval by an exact sock_diag lookup (source.Local.TraceHost,
// as check does). Between bursts it costs nothing; the findings and
// /metrics keep the last burst's picture until the next.
const (
	depBurst = 3 * time.Second
	// maxDepDestinations bounds the destinations per server in /metrics,
	// the busiest first: the series stay at most MaxPools × 8 per name.
	maxDepDestinations = 8
)

// depTraces holds the last burst's dependencies.
type depTraces struct {
	mu     sync.Mutex
	last   *evidence.Traced
	conns  int           // connections the last burst followed
	took   time.Duration // CPU time the process spent during it
	doneAt time.Time
}

// traceDeps runs a burst every a.cfg.DepEvery, on a pace.Ticker's
// lattice from the first snapshot that listed the sockets, until ctx
// ends.
func (a *Agent) traceDeps(ctx context.Context) {
	listed := func() *evidence.Snapshot {
		if l := a.latest(); l != nil && l.Sockets != nil {
			return l
		}
		return nil
	}
	for range pace.Every(ctx, a.cfg.Interval) {
		if listed() != nil {
			break
		}
	}
	for range pace.Every(ctx, a.cfg.DepEvery) {
		if l := listed(); l != nil {
			a.depBurst(ctx, l)
		}
	}
}

// depBurst traces the servers behind the snapshot's listeners for one
// burst and keeps what they showed.
//
// The burst runs on a locked OS thread so that its CPU time can be
// measured alone (its lookups are synchronous on this goroutine).
func (a *Agent) depBurst(ctx context.Context, l *evidence.Snapshot) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	bctx, cancel := context.WithTimeout(ctx, min(depBurst, a.cfg.DepEvery))
	defer cancel()
	cpu0 := threadCPU()
	tr, err := a.src.TraceHost(bctx, l.Sockets.Listeners, MaxPools)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		a.cfg.Log.Warn("dependencies not traced", "err", err)
		return
	}
	conns := 0
	for _, s := range tr.Servers {
		for _, d := range s.Deps {
			conns += d.Conns + d.New
		}
	}
	a.deps.mu.Lock()
	a.deps.last, a.deps.conns, a.deps.took, a.deps.doneAt = tr, conns, threadCPU()-cpu0, time.Now()
	a.deps.mu.Unlock()
}

// traced is the last burst's dependencies while they are recent: at
// most two periods old (a burst that failed leaves none rather than an
// old picture for ever).
func (a *Agent) traced(now time.Time) *evidence.Traced {
	a.deps.mu.Lock()
	defer a.deps.mu.Unlock()
	if a.deps.last == nil || now.Sub(a.deps.doneAt) > 2*a.cfg.DepEvery+depBurst {
		return nil
	}
	return a.deps.last
}

// depView is one dependency of one server, for /metrics.
type depView struct {
	App, Listener, Destination, Owner string
	Dep                               app.Dependency
}

// depViews are the last burst's dependencies, at most
// maxDepDestinations per server (the busiest: Deps are sorted so), and
// the burst's cost.
func (a *Agent) depViews(now time.Time) (out []depView, conns int, cpu time.Duration, at time.Time) {
	tr := a.traced(now)
	if tr == nil {
		return nil, 0, 0, time.Time{}
	}
	for _, s := range tr.Servers {
		for _, d := range s.Deps[:min(len(s.Deps), maxDepDestinations)] {
			out = append(out, depView{App: s.Kind, Listener: s.Addr, Destination: d.Addr, Owner: ownerKind(d.Owner), Dep: d})
		}
	}
	a.deps.mu.Lock()
	defer a.deps.mu.Unlock()
	return out, a.deps.conns, a.deps.took, a.deps.doneAt
}

// ownerKind is an owner without its pid ("redis-server (pid 812)" →
// "redis-server"): a restart must not make new series.
func ownerKind(owner string) string {
	if i := strings.LastIndex(owner, " (pid "); i >= 0 {
		return owner[:i]
	}
	return owner
}
