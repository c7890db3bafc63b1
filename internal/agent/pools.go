package agent

import (
	"context"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cgroup"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// MaxPools bounds the listening ports whose applications the agent
// follows for /metrics: each costs a read of its workers' threads every
// interval.
const MaxPools = 16

// pools follow the applications behind the namespace's TCP listeners,
// without anyone asking (unlike watches): their workers, busy and by
// what they wait on, are /metrics' per-application series. The servers
// are found again when a port's owners change (a restart).
type pools struct {
	ns netns.NS

	mu     sync.Mutex
	byPort map[int]*pool
}

type pool struct {
	owners []int // the listeners' PIDs when the servers were found
	obs    *app.Observer
}

func newPools(ns netns.NS) *pools { return &pools{ns: ns, byPort: map[int]*pool{}} }

// sample finds the servers of listeners new since the last call, forgets
// those gone, and samples every server's workers once.
func (p *pools) sample(ctx context.Context, listeners []evidence.Listener) {
	owners := map[int][]int{}
	self := os.Getpid()
	for _, l := range listeners {
		// The agent's own listener is no application to follow.
		if l.Proto == "unix" || l.Port == 0 || len(l.PIDs) == 0 || slices.Contains(l.PIDs, self) {
			continue
		}
		owners[l.Port] = append(owners[l.Port], l.PIDs...)
	}
	ports := make([]int, 0, len(owners))
	for port, pids := range owners {
		slices.Sort(pids)
		owners[port] = slices.Compact(pids)
		ports = append(ports, port)
	}
	// The lowest ports first: services, before ephemeral listeners.
	slices.Sort(ports)
	ports = ports[:min(len(ports), MaxPools)]
	p.mu.Lock()
	defer p.mu.Unlock()
	for port := range p.byPort {
		if !slices.Contains(ports, port) {
			delete(p.byPort, port)
		}
	}
	for _, port := range ports {
		cur := p.byPort[port]
		if cur == nil || !slices.Equal(cur.owners, owners[port]) {
			p.byPort[port] = &pool{owners: owners[port], obs: app.Discover(ctx, listeners, port, p.ns)}
		}
	}
	for _, pl := range p.byPort {
		pl.obs.Sample(ctx)
		for _, s := range pl.obs.Servers {
			// Only the latest is served.
			if n := len(s.Samples); n > 1 {
				s.Samples = slices.Delete(s.Samples, 0, n-1)
			}
		}
	}
}

// poolView is one server's latest sample, for /metrics.
type poolView struct {
	App, Listener string
	Sample        app.Sample
	// Limit is the pool's configured maximum (php-fpm pm.max_children),
	// 0 when unknown.
	Limit int
	// CPU is its threads' time since the agent followed it, and
	// CGroup the group that limits it; HasCPU is false before its
	// second sample.
	CPU    app.CPUTotal
	HasCPU bool
	CGroup *cgroup.Group
}

// views returns the latest sample of every followed server, each
// server once (an upstream behind two fronts is one).
func (p *pools) views(now time.Time, maxAge time.Duration) []poolView {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []poolView
	seen := map[string]bool{}
	for _, pl := range p.byPort {
		for _, s := range pl.obs.Servers {
			if seen[s.Addr] || len(s.Samples) == 0 {
				continue
			}
			smp := s.Samples[len(s.Samples)-1]
			if now.Sub(smp.Time) > maxAge {
				continue
			}
			seen[s.Addr] = true
			v := poolView{App: s.Kind, Listener: s.Addr, Sample: smp, CGroup: s.CGroup}
			v.CPU, v.HasCPU = pl.obs.Total(s)
			if s.Pool != nil {
				v.Limit = s.Pool.MaxChildren.Value
			}
			out = append(out, v)
		}
	}
	return out
}

// busy is how many of the sample's workers were serving: php-fpm's
// status page when it answered (less the worker serving it), all of
// them when it did not answer in time, otherwise the workers not idle
// (a thread waiting for a connection or event), as the worker-pool rule
// counts them.
func busy(s app.Sample) int {
	switch {
	case s.Pool != nil:
		return max(s.Pool.Active-1, 0)
	case s.StatusBusy:
		return s.Workers
	}
	return max(s.Workers-s.Waits[app.WaitIdle], 0)
}
