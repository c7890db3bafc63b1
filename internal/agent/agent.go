package agent

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/netdoctor/netdoctor/internal/collect"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/pace"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/source"
)

// Config says what the agent observes and keeps.
type Config struct {
	// NetNS is the namespace observed (the zero NS: the agent's own).
	NetNS netns.NS
	// Interval is the time between snapshots (default 1 s).
	Interval time.Duration
	// Retain is how far back the window reaches (default 15 min).
	Retain time.Duration
	// Recent is the window the current findings rest on (default 30 s):
	// a counter must have risen within it for a finding to be active.
	Recent time.Duration
	// DNSEvery is how often the agent probes the namespace's resolvers
	// on its own (default 5 min; negative: only when a watch asks).
	DNSEvery time.Duration
	// DNSName is the name the probes look up (default: the host name).
	DNSName string
	// Incidents is the directory incident bundles go to; "" keeps none.
	Incidents string
	// Before and After are the incident window around the moment a
	// finding turns active (default 5 min and 1 min, within Retain).
	Before, After time.Duration
	// IncidentBytes caps the incidents kept in the directory; the oldest
	// are removed first (default 100 MiB).
	IncidentBytes int64
	// MaxBytes caps the window's stored snapshots (default 48 MiB).
	MaxBytes int
	// Version is netdoctor's, served with the host.
	Version string
	// TestEndpoint is the address of the layer-test endpoint the agent
	// offers (TestEndpoint), served with the host; "" when it offers
	// none.
	TestEndpoint string
	// DepEvery is how often the agent traces the followed servers'
	// dependencies, for a burst of 3 s (default 15 s; negative: never).
	DepEvery time.Duration
	Log      *slog.Logger
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = time.Second
	}
	if c.Retain <= 0 {
		c.Retain = 15 * time.Minute
	}
	if c.Recent <= 0 {
		c.Recent = 30 * time.Second
	}
	c.Recent = max(min(c.Recent, c.Retain), 2*c.Interval)
	if c.DNSEvery == 0 {
		c.DNSEvery = 5 * time.Minute
	}
	if c.Before <= 0 {
		c.Before = 5 * time.Minute
	}
	if c.After <= 0 {
		c.After = time.Minute
	}
	// The window around an incident must still be held when it is
	// written.
	c.Before = min(c.Before, c.Retain-c.After)
	if c.Before < 0 {
		c.Before, c.After = c.Retain/2, c.Retain/2
	}
	if c.IncidentBytes <= 0 {
		c.IncidentBytes = 100 << 20
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = 48 << 20
	}
	if c.DepEvery == 0 {
		c.DepEvery = 15 * time.Second
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
}

// Agent samples one namespace every interval, keeps a rolling window of
// snapshots, diagnoses its recent part continuously and serves all of it
// (Handler).
type Agent struct {
	cfg  Config
	src  *source.Local
	host evidence.Host
	// snapMu makes snapshots one at a time, whoever asks: each kernel
	// log line, and each DNS probe, then belongs to exactly one.
	snapMu  sync.Mutex
	ring    *ring
	watches *watches
	pools   *pools
	deps    depTraces
	dns     *dnsMetrics
	inc     *incidents
	started time.Time

	mu      sync.Mutex
	current *report.Report
	// active are the findings active in the last diagnosis, by key,
	// with the time they turned active.
	active    map[string]time.Time
	lastProbe *evidence.Resolver
	probedAt  time.Time

	stats stats
	// requests counts the requests of every listener's handler.
	requestsOnce sync.Once
	requests     *prometheus.CounterVec
}

// apiRequests is the counter of requests, one for every handler and
// registry.
func (a *Agent) apiRequests() *prometheus.CounterVec {
	a.requestsOnce.Do(func() {
		a.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "netdoctor_agent_api_requests_total",
			Help: "Requests to the agent, by endpoint and HTTP status."}, []string{"path", "code"})
	})
	return a.requests
}

// stats are the agent's own health, for /metrics and /healthz.
type stats struct {
	snapshots, evalErrors, incidents, incidentErrors atomic.Uint64
	lastSnapshot                                     atomic.Int64 // unix ns
	lastDuration, lastEval, lastScrape               atomic.Int64 // ns
	profiles                                         atomic.Uint64
	lastProfileCPU                                   atomic.Int64 // ns
}

// New prepares the collectors for cfg.NetNS and the incident directory.
// It fails when the namespace cannot be entered or the directory is not
// private to root.
func New(cfg Config) (*Agent, error) {
	cfg.defaults()
	a := &Agent{cfg: cfg, active: map[string]time.Time{}, started: time.Now()}
	src, err := source.NewLocal(collect.Config{NetNS: cfg.NetNS, DNS: true, DNSName: cfg.DNSName, DNSEvery: 1, DNSRepeat: 40, DNSWhen: a.dnsDue, Log: cfg.Log, Drops: true})
	if err != nil {
		return nil, err
	}
	a.src, a.host = src, src.Host()
	n := int(cfg.Retain/cfg.Interval) + 1
	a.ring = newRing(n, cfg.MaxBytes, int(cfg.Recent/cfg.Interval)+1)
	a.watches = newWatches(cfg.NetNS, cfg.Retain, cfg.Interval)
	a.pools = newPools(cfg.NetNS)
	a.dns = newDNSMetrics()
	if cfg.Incidents != "" {
		if a.inc, err = newIncidents(cfg.Incidents, cfg.Before, cfg.After, cfg.IncidentBytes, cfg.Log, a.incidentProfile); err != nil {
			src.Close()
			return nil, err
		}
	}
	return a, nil
}

// Close releases the collectors.
func (a *Agent) Close() error { return a.src.Close() }

// Host is what the agent observes.
func (a *Agent) Host() evidence.Host { return a.host }

// Run samples every interval until ctx ends: a snapshot into the window,
// the watched servers' workers, then the diagnosis of the recent window
// and the incidents it starts or completes. A failing collector makes a
// snapshot partial; nothing that goes wrong in one tick stops the next.
func (a *Agent) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Workers are sampled beside the snapshots, on a lattice of
		// their own: a server whose status page hangs must not delay
		// the kernel's evidence.
		for tick := range pace.Every(ctx, a.cfg.Interval) {
			a.watches.sample(ctx, tick.At)
			if l := a.latest(); l != nil && l.Sockets != nil {
				a.pools.sample(ctx, l.Sockets.Listeners)
			}
		}
	}()
	if a.cfg.DepEvery > 0 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a.traceDeps(ctx)
		}()
	}
	for tick := range pace.Every(ctx, a.cfg.Interval) {
		if tick.Missed > 0 {
			// A snapshot or a diagnosis overran whole intervals: the
			// window has a gap there.
			a.cfg.Log.Warn("sampling fell behind", "skipped", tick.Missed, "late", tick.Late())
		}
		a.tick(ctx)
	}
	wg.Wait()
	if a.inc != nil {
		// What is pending is written with the window it has.
		a.inc.flush(a.ring, a.host, a.traced(time.Now()), time.Now())
	}
	return nil
}

// tick is one interval: snapshot, diagnose, incidents.
func (a *Agent) tick(ctx context.Context) {
	if _, err := a.Take(ctx); err != nil {
		a.cfg.Log.Warn("snapshot not kept", "err", err)
	}
	a.evaluate(time.Now())
}

// Take takes a snapshot now and keeps it in the window. It is the
// periodic snapshot, and the one a client asks for (a run marking the
// start of its load, or its end).
func (a *Agent) Take(ctx context.Context) (snap evidence.Snapshot, err error) {
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	start := time.Now()
	func() {
		defer func() {
			// A collector's panic is a bug; the agent keeps sampling
			// and says so in the snapshot.
			if p := recover(); p != nil {
				a.cfg.Log.Error("collector panic", "panic", p, "stack", string(debug.Stack()))
				snap.Status = append(snap.Status, evidence.Status{Collector: "agent", State: evidence.StateError, Error: fmt.Sprint("panic: ", p)})
			}
		}()
		snap = a.src.Snapshot(ctx)
	}()
	if snap.Time.IsZero() {
		snap.Time = start
	}
	if r := snap.Resolver; r != nil && len(r.Probes) > 0 {
		a.dns.observe(r.Probes)
		a.mu.Lock()
		a.lastProbe, a.probedAt = r, snap.Time
		a.mu.Unlock()
	}
	a.stats.lastDuration.Store(int64(time.Since(start)))
	if err := a.ring.add(snap); err != nil {
		return snap, err
	}
	a.stats.snapshots.Add(1)
	a.stats.lastSnapshot.Store(snap.Time.UnixNano())
	return snap, nil
}

// dnsDue says whether the snapshot being taken probes the resolvers:
// on the agent's own schedule, or because a watch asked (a run with
// --dns, or whose servers were seen waiting in a name lookup).
func (a *Agent) dnsDue() bool {
	now := time.Now()
	if a.watches.dnsDue(now) {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cfg.DNSEvery > 0 && (a.probedAt.IsZero() || now.Sub(a.probedAt) >= a.cfg.DNSEvery)
}

// evaluate diagnoses the recent window and notes the findings that
// turned active, and those that cleared.
func (a *Agent) evaluate(now time.Time) {
	start := time.Now()
	defer func() {
		a.stats.lastEval.Store(int64(time.Since(start)))
		if p := recover(); p != nil {
			a.stats.evalErrors.Add(1)
			a.cfg.Log.Error("rules panic", "panic", p, "stack", string(debug.Stack()))
		}
	}()
	b := a.recent()
	tr := a.traced(now)
	rep := report.New("agent", b, rules.CheckHost(b, tr, nil)) // no profile: the agent takes one on incidents
	rep.Dependencies = tr
	a.mu.Lock()
	a.current = rep
	var turned []report.Finding
	still := map[string]time.Time{}
	for _, f := range rep.Findings {
		if f.Status != report.Active {
			continue
		}
		k := key(f)
		since, ok := a.active[k]
		if !ok {
			since = now
			turned = append(turned, f)
		}
		still[k] = since
	}
	for k := range a.active {
		if _, ok := still[k]; !ok {
			a.cfg.Log.Info("finding cleared", "finding", k)
		}
	}
	a.active = still
	a.mu.Unlock()
	for _, f := range turned {
		a.cfg.Log.Info("finding active", "id", f.ID, "severity", f.Severity, "subject", f.Subject, "title", f.Title)
	}
	if a.inc != nil {
		if len(turned) > 0 {
			a.inc.trigger(now, turned, a.watches.describe())
		}
		n, err := a.inc.due(a.ring, a.host, a.traced(now), now)
		a.stats.incidents.Add(uint64(n))
		if err != nil {
			a.stats.incidentErrors.Add(1)
			a.cfg.Log.Error("incident not written", "err", err)
		}
	}
}

// recent is the bundle the current findings rest on: the last Recent of
// snapshots. The resolvers' last probe is carried into it when it is
// older: the agent probes every few minutes, and what the probe measured
// stays the resolvers' state until the next.
func (a *Agent) recent() *evidence.Bundle {
	snaps := a.ring.Recent()
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: a.host, Snapshots: snaps}
	if len(snaps) == 0 {
		return b
	}
	b.Start = snaps[0].Time
	for _, s := range snaps {
		if s.Resolver != nil && len(s.Resolver.Probes) > 0 {
			return b
		}
	}
	a.mu.Lock()
	probe := a.lastProbe
	a.mu.Unlock()
	if probe != nil && snaps[0].Resolver != nil {
		r := *snaps[0].Resolver
		r.Probes = probe.Probes
		snaps[0].Resolver = &r // the slice is ours, the snapshot shared: replace, do not write through
	}
	return b
}

// latest is the newest snapshot in the window, or nil.
func (a *Agent) latest() *evidence.Snapshot {
	snaps := a.ring.Recent()
	if len(snaps) == 0 {
		return nil
	}
	return &snaps[len(snaps)-1]
}

// Current is the latest diagnosis; nil before the first.
func (a *Agent) Current() *report.Report {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current
}

// key identifies a finding across evaluations.
func key(f report.Finding) string { return string(f.ID) + " " + f.Subject }

// errStale marks an agent whose sampler has stopped.
var errStale = errors.New("no snapshot for more than five intervals")

// healthy reports whether the sampler is alive.
func (a *Agent) healthy(now time.Time) error {
	last := a.stats.lastSnapshot.Load()
	if last == 0 {
		if now.Sub(a.started) > 5*a.cfg.Interval+10*time.Second {
			return errStale
		}
		return nil
	}
	if now.Sub(time.Unix(0, last)) > 5*a.cfg.Interval+10*time.Second {
		return errStale
	}
	return nil
}
