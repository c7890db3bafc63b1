package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// watches are the servers behind ports that clients (a run from another
// host) asked the agent to follow: found through the listeners' owners
// as run finds them, their workers sampled every interval, their logs
// counted from the watch's start. A watch is the agent's own state, not
// a change to the host: it ends when its client finishes it or stops
// asking for a minute, and at most MaxWatches exist.
type watches struct {
	ns       netns.NS
	retain   time.Duration
	interval time.Duration

	mu   sync.Mutex
	byID map[string]*watch
}

type watch struct {
	id      string
	port    int
	from    string // the client's address, for incidents and logs
	created time.Time

	// mu is held while the servers are sampled and while they are read
	// (a status page may take most of a second).
	mu       sync.Mutex
	obs      *app.Observer
	finished bool
	// deps traces the servers' dependencies, from the watch's opening
	// or the client's load's start, until the load's end or the watch's
	// (nil when not tracing). Stopping it writes the servers' Deps, so
	// it is stopped with mu held.
	deps *app.DepTrace

	// state guards the rest, which the snapshot path reads: it must not
	// wait for a sample.
	state sync.Mutex
	seen  time.Time // last request for it
	// dns: the client asked for a resolver probe at dnsAt (run --dns);
	// sawDNS: the servers' workers were seen in a name lookup, which
	// asks for one too. probed: it was made.
	dns, sawDNS, probed bool
	dnsAt               time.Time
}

func newWatches(ns netns.NS, retain, interval time.Duration) *watches {
	return &watches{ns: ns, retain: retain, interval: interval, byID: map[string]*watch{}}
}

// errTooMany is returned when MaxWatches are open.
var errTooMany = errors.New("too many watches open: finish one or wait a minute for an idle one to expire")

// open starts watching the servers behind port among the listeners of
// the latest snapshot. It returns nil, nil when nothing the agent can
// see owns the port.
func (ws *watches) open(ctx context.Context, listeners []evidence.Listener, port int, from string, dns bool, dnsAfter time.Duration, now time.Time) (*watch, error) {
	ws.mu.Lock()
	ws.expire(now)
	n := len(ws.byID)
	ws.mu.Unlock()
	if n >= agentapi.MaxWatches {
		return nil, errTooMany
	}
	obs := app.Discover(ctx, listeners, port, ws.ns)
	if len(obs.Servers) == 0 {
		return nil, nil
	}
	var id [8]byte
	rand.Read(id[:])
	w := &watch{id: hex.EncodeToString(id[:]), port: port, from: from, created: now, obs: obs, seen: now, dns: dns, dnsAt: now.Add(dnsAfter)}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if len(ws.byID) >= agentapi.MaxWatches {
		return nil, errTooMany
	}
	// Until its client says when its load starts (an older one never
	// does), the dependencies are traced from now.
	w.deps = obs.StartDeps()
	ws.byID[w.id] = w
	return w, nil
}

// get returns an open watch and notes the request.
func (ws *watches) get(id string, now time.Time) *watch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.expire(now)
	w := ws.byID[id]
	if w != nil {
		w.state.Lock()
		w.seen = now
		w.state.Unlock()
	}
	return w
}

// finish ends a watch.
func (ws *watches) finish(w *watch) {
	ws.mu.Lock()
	delete(ws.byID, w.id)
	ws.mu.Unlock()
	w.end()
}

// expire drops the watches nobody asked for within WatchTTL. ws.mu is
// held; their traces stop on goroutines of their own, as a sample may
// hold a watch's lock for most of a second.
func (ws *watches) expire(now time.Time) {
	for id, w := range ws.byID {
		w.state.Lock()
		idle := now.Sub(w.seen) > agentapi.WatchTTL
		w.state.Unlock()
		if idle {
			delete(ws.byID, id)
			go w.end()
		}
	}
}

// end stops the watch's dependency trace for good.
func (w *watch) end() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.finished = true
	w.deps.Stop()
	w.deps = nil
}

// load hears from the client that its load starts or ends. At the start
// the trace begins again, so that the quiet time before the load does
// not dilute what the load showed; at the end it stops, and the servers
// keep what it saw for the finish.
func (w *watch) load(start bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished {
		return
	}
	w.deps.Stop()
	w.deps = nil
	if start {
		w.deps = w.obs.StartDeps()
	}
}

func (ws *watches) list() []*watch {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]*watch, 0, len(ws.byID))
	for _, w := range ws.byID {
		out = append(out, w)
	}
	return out
}

// sample records one interval of every watched server's workers.
// Samples older than the retention are dropped: a watch polled for days
// stays bounded.
func (ws *watches) sample(ctx context.Context, now time.Time) {
	ws.mu.Lock()
	ws.expire(now)
	ws.mu.Unlock()
	for _, w := range ws.list() {
		w.mu.Lock()
		if !w.finished {
			w.obs.Sample(ctx)
			for _, s := range w.obs.Current() {
				keep := int(ws.retain/ws.interval) + 1
				if len(s.Samples) > keep {
					s.Samples = slices.Delete(s.Samples, 0, len(s.Samples)-keep)
				}
			}
			for _, smp := range w.obs.Last() {
				if smp.Waits[app.WaitDNS] > 0 {
					w.state.Lock()
					w.sawDNS = true
					w.state.Unlock()
				}
			}
		}
		w.mu.Unlock()
	}
}

// dnsDue reports whether a watch wants the resolvers probed now, and
// counts the probe as made.
func (ws *watches) dnsDue(now time.Time) bool {
	due := false
	for _, w := range ws.list() {
		w.state.Lock()
		if !w.probed && (w.dns || w.sawDNS) && !now.Before(w.dnsAt) {
			w.probed, due = true, true
		}
		w.state.Unlock()
	}
	return due
}

// view is the watch as served: its servers with the samples taken after
// since; on finish every sample and what the logs gained.
func (w *watch) view(since time.Time, finish bool, now time.Time) agentapi.Watch {
	w.mu.Lock()
	defer w.mu.Unlock()
	var servers []*app.Server
	if finish && !w.finished {
		w.finished = true
		w.deps.Stop()
		w.deps = nil
		servers = w.obs.Finish()
	} else {
		servers = w.obs.Current()
	}
	out := agentapi.Watch{ID: w.id, Port: w.port, Now: now}
	for _, s := range servers {
		c := *s
		c.Samples = nil
		for _, smp := range s.Samples {
			if smp.Time.After(since) {
				c.Samples = append(c.Samples, smp)
			}
		}
		if !finish {
			c.Logs = nil // counted on finish only
		}
		out.Servers = append(out.Servers, &c)
	}
	return out
}

// describe says which ports are watched, and by whom, for an incident
// that happens meanwhile: a run's own load may be what it records.
func (ws *watches) describe() string {
	var out []string
	for _, w := range ws.list() {
		out = append(out, fmt.Sprintf("port %d watched by %s since %s", w.port, w.from, w.created.UTC().Format(time.TimeOnly)))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}
