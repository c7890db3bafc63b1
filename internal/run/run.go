package run

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/collect"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/pace"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/source"
)

// Options describe one run.
type Options struct {
	Load load.Options
	// ServerNetNS is the server's namespace. The caller's own (the zero
	// NS) means: observed when the target address is local, else not.
	ServerNetNS netns.NS
	// Baseline is the quiet time sampled before the load (default 3 s);
	// Tail the time after it (default 2 s).
	Baseline, Tail time.Duration
	Interval       time.Duration // sampling interval, default 1 s
	DNS            bool
	// ServerAgent, when set, is the agent the server's side comes from,
	// over the network, instead of a namespace of this host.
	ServerAgent *source.RemoteConfig
	// ServerTwin, when set while the server is observed in its
	// namespace (ServerNetNS), is an agent in that namespace that
	// observes it too, through the same load: the run is diagnosed a
	// second time from the agent's evidence (Result.Twin). Two runs,
	// one through each, would differ in their load's luck as well as
	// their evidence; one load seen twice differs only in the evidence.
	ServerTwin *source.RemoteConfig `json:",omitempty"`
	// NoPathProbe skips the probe of the path through the server agent's
	// test endpoint before the load (pathProbe).
	NoPathProbe bool
	// ProfileHz is the frequency of the on-CPU profile of the servers
	// during the load, per CPU; 0 takes none. Only servers on this host
	// are profiled (through an agent: its profile endpoint).
	ProfileHz int
	// Loader, when set, sends the load instead of this process: a
	// distributed run's workers (a cluster's Job, launched before the
	// run with Load.StartAt as their common start, until which the
	// baseline lasts). It is called when the load is due and returns
	// their merged result.
	Loader func(ctx context.Context, o load.Options) (*load.Result, error) `json:"-"`
	// OnPhase, if set, is called as each timed step begins: "baseline"
	// and "tail" with their length, "load" with the load's duration (0
	// when bounded by its requests alone).
	OnPhase func(name string, d time.Duration) `json:"-"`
}

// Result is a finished run: what it observed (the embedded evidence.Run,
// which `run --bundle` writes as a bundle file, evidence.RunFile) and
// what the rules made of it.
type Result struct {
	*evidence.Run
	Findings []report.Finding
	// Shape is the per-second throughput's pattern and what moved with it.
	Shape report.Shape
	// Twin is the same run diagnosed from Options.ServerTwin's agent.
	Twin *Result `json:"-"`
}

// Report builds the run's report around the server side's load window,
// or the client's when the server was not observed.
func (res *Result) Report() *report.Run {
	var b *evidence.Bundle
	for _, s := range res.Sides {
		if s.Observed && b == nil {
			b = res.Window(s)
		}
	}
	if b == nil {
		b = &evidence.Bundle{}
	}
	r := &report.Run{Report: report.New("run", b, res.Findings), Load: res.Load, LoadNotes: rules.LoadNotes(res.Run), Shape: res.Shape, Servers: res.Servers, Path: res.Path, Waits: rules.Waits(res.Run)}
	r.ProfileError = res.ProfileError
	r.TimeSplit = rules.TimeSplit(res.Run)
	if res.Profile != nil {
		sum, err := cpuprof.Summarize(res.Profile)
		if err != nil {
			r.ProfileError = "the profile could not be read: " + err.Error()
		}
		r.Profile = sum
		r.Flame, _ = cpuprof.Flame(res.Profile)
	}
	for _, s := range res.Sides {
		rs := s.SideInfo
		r.Sides = append(r.Sides, &rs)
		if rs.Lost != "" {
			// What the rules found rests on the evidence before the
			// loss: the verdict says so rather than claim more.
			r.Partial, r.Status = true, report.OutcomePartial
			r.Verdict = fmt.Sprintf("PARTIAL: %s (on the %s side's evidence up to %s, when its agent stopped answering)", r.Verdict, rs.Name, rs.LostAt.Format("15:04:05"))
		}
	}
	return r
}

// Diagnose runs the rules over what a run observed: a run's own
// evidence, or a run bundle's read again (evidence.Read, KindRun), so a
// run on a production host can be diagnosed elsewhere, and real runs
// serve as test fixtures.
//
// also are the hosts of netdoctor's observers beside the run's sides
// (an agent twin's), whose processes are netdoctor's own as the sides'
// are (evidence.Run.ForgetOwn).
func Diagnose(ev *evidence.Run, also ...evidence.Host) *Result {
	ev.ForgetOwn(also...)
	res := &Result{Run: ev}
	res.Findings, res.Shape = rules.Diagnose(ev)
	return res
}

// hostOf is where a side's evidence was taken, empty without any.
func hostOf(s *evidence.RunSide) evidence.Host {
	if s == nil || s.Bundle == nil {
		return evidence.Host{}
	}
	return s.Bundle.Host
}

// ErrNotListening reports a target nobody listens on.
var ErrNotListening = errors.New("target is not listening")

// Run samples both sides, drives the load and diagnoses. The load's own
// errors (bad URL, unresolvable host) come back before any sampling.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Baseline == 0 {
		o.Baseline = 3 * time.Second
	}
	if o.Tail == 0 {
		o.Tail = 2 * time.Second
	}
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	var sawDNS atomic.Bool
	server, client, err := sides(ctx, o, &sawDNS)
	if err != nil {
		return nil, err
	}
	defer server.close()
	defer client.close()
	twin, err := twinSide(ctx, o, server)
	if err != nil {
		return nil, err
	}
	defer twin.close()
	if err := probe(ctx, o.Load.URL, server); err != nil {
		return nil, err
	}

	ev := &evidence.Run{Port: targetPort(o.Load.URL)}
	ev.Path = pathProbe(ctx, o, server)
	var apps source.Apps
	if src := server.source(); src != nil {
		if p, err := strconv.Atoi(ev.Port); err == nil {
			if a := src.Discover(ctx, p); a != nil {
				apps = &dnsWatch{Apps: a, saw: &sawDNS}
			}
		}
	}
	var twinApps source.Apps
	if twin != nil {
		if p, err := strconv.Atoi(ev.Port); err == nil {
			twinApps = twin.src.Discover(ctx, p)
		}
	}
	var recs []*source.Recorder
	for _, s := range []*side{server, client, twin} {
		if s == nil || s.src == nil {
			continue
		}
		var a source.Apps
		switch s {
		case server.owner():
			a = apps
		case twin:
			a = twinApps
		}
		s.rec = source.Record(ctx, s.src, a, o.Interval)
		recs = append(recs, s.rec)
	}
	o.phase("baseline", o.Baseline)
	if at := o.Load.StartAt; !at.IsZero() {
		// A worker of a distributed run: its baseline lasts until the
		// common start, less the time its mark's snapshot may take.
		pace.Until(ctx, at.Add(-markSlack))
	} else {
		pace.Sleep(ctx, o.Baseline)
	}
	// Sampling resumes once the load has begun (or failed to).
	resume := sync.OnceFunc(source.Mark(ctx, recs...))
	ev.LoadStart = time.Now()
	if at := o.Load.StartAt; at.After(ev.LoadStart) {
		ev.LoadStart = at
	}
	started := o.Load.OnStart
	o.Load.OnStart = func() {
		resume()
		if started != nil {
			started()
		}
	}
	o.phase("load", o.Load.Duration)
	stopDeps := traceDeps(ctx, apps)
	stopProfile := profileServers(o, server, apps, ev)
	var evTwin *evidence.Run
	stopTwinDeps := func() {}
	if twin != nil {
		evTwin = &evidence.Run{Port: ev.Port}
		stopTwinDeps = traceDeps(ctx, twinApps)
		profileServers(o, twin, twinApps, evTwin)() // the agent's to take: says so
	}
	var lr *load.Result
	var lerr error
	if o.Loader != nil {
		if o.Load.OnStart != nil {
			o.Load.OnStart() // the workers start now
		}
		lr, lerr = o.Loader(ctx, o.Load)
	} else {
		lr, lerr = load.Run(ctx, o.Load)
	}
	stopProfile()
	stopDeps()
	stopTwinDeps()
	resume()
	ev.LoadEnd = time.Now()
	if lerr == nil {
		o.phase("tail", o.Tail)
		pace.Sleep(ctx, o.Tail)
	}
	source.Stop(recs...)
	if lerr != nil {
		return nil, lerr
	}
	ev.Load = lr
	if apps != nil {
		ev.Servers = apps.Finish()
	}
	for _, s := range []*side{server, client} {
		ev.Sides = append(ev.Sides, s.evidence())
	}
	if twin == nil {
		return Diagnose(ev), nil
	}
	evTwin.LoadStart, evTwin.LoadEnd, evTwin.Load = ev.LoadStart, ev.LoadEnd, lr
	if twinApps != nil {
		evTwin.Servers = twinApps.Finish()
	}
	evTwin.Sides = []*evidence.RunSide{twin.evidence(), client.evidence()}
	// Each sees the other's observer: the agent among the processes on
	// the servers' CPUs, and the agent the namespace's sampler.
	res := Diagnose(ev, hostOf(evTwin.Sides[0]))
	res.Twin = Diagnose(evTwin, hostOf(ev.Sides[0]))
	return res, nil
}

// twinSide is the server's side as Options.ServerTwin's agent observes
// it, beside the namespace's: nil without one.
func twinSide(ctx context.Context, o Options, server *side) (*side, error) {
	if o.ServerTwin == nil {
		return nil, nil
	}
	if server.src == nil || server.remote != nil || o.ServerNetNS.Own() {
		return nil, errors.New("a twin agent observes a server that is also observed in its namespace (--server-netns)")
	}
	// On the same terms as the agent of a run through it (sides).
	rc := *o.ServerTwin
	rc.DNS, rc.DNSAfter = o.DNS, o.Baseline+500*time.Millisecond
	r, err := source.NewRemote(ctx, rc)
	if err != nil {
		return nil, fmt.Errorf("observe the server side through its twin agent: %w", err)
	}
	return &side{name: report.Server, src: r, remote: r}, nil
}

// markSlack is how long before a distributed run's common start its
// baseline ends: the mark's snapshot is taken meanwhile, so that the
// load starts on time on a busy host too.
const markSlack = 500 * time.Millisecond

// phase tells OnPhase that a timed step begins.
func (o *Options) phase(name string, d time.Duration) {
	if o.OnPhase != nil {
		o.OnPhase(name, d)
	}
}

// profileServers starts the servers' on-CPU profile, when asked for and
// they run on this host; stop ends it and hands it to ev.
func profileServers(o Options, server *side, apps source.Apps, ev *evidence.Run) (stop func()) {
	if o.ProfileHz <= 0 {
		return func() {}
	}
	if server.remote != nil || server.owner().remote != nil {
		ev.ProfileError = "the server is observed through its agent: its profile is the agent's to take (GET " + agentapi.PathProfile + ")"
		return func() {}
	}
	if apps == nil || len(apps.Processes()) == 0 {
		ev.ProfileError = "no server found behind the port: nothing to profile"
		return func() {}
	}
	p, done, err := cpuprof.Exclusive(cpuprof.Options{Hz: o.ProfileHz, Servers: apps.Processes})
	if err != nil {
		ev.ProfileError = err.Error()
		return func() {}
	}
	return func() {
		ev.Profile = p.Stop()
		done()
	}
}

// traceDeps traces the servers' dependencies until stop is called, which
// waits for the tracer to hand its results over.
func traceDeps(ctx context.Context, t source.Apps) (stop func()) {
	if t == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = t.TraceDeps(ctx)
	}()
	return func() { cancel(); <-done }
}

// sides decides what to observe: the server in its namespace (or in ours
// when the target address is ours), the client in ours.
func sides(ctx context.Context, o Options, sawDNS *atomic.Bool) (server, client *side, err error) {
	client = &side{name: report.Client}
	server = &side{name: report.Server, ns: o.ServerNetNS}
	// One probe per side, in the load's first second: evidence of the
	// window, made while the application resolves under load. The
	// server's resolver is probed without --dns too, as soon as its
	// workers are seen waiting in a lookup: then it is in the request
	// path, and its loss and latency are what the requests wait for.
	cfg := collect.Config{DNS: o.DNS, DNSEvery: 1 << 30, DNSRepeat: 40, DNSDelay: o.Baseline + 500*time.Millisecond, Drops: true}
	srvCfg := cfg
	srvCfg.DNS, srvCfg.DNSWhen = true, func() bool { return o.DNS || sawDNS.Load() }
	local := o.ServerAgent == nil && o.ServerNetNS.Own() && localTarget(o.Load.URL)
	if local {
		cfg = srvCfg // one namespace, the server's resolver
	}
	if client.src, err = source.NewLocal(cfg); err != nil {
		return nil, nil, fmt.Errorf("observe the client side: %w", err)
	}
	cfg = srvCfg
	switch {
	case o.ServerAgent != nil:
		// The agent probes its resolvers itself, on the same terms as
		// the local server's collectors above.
		rc := *o.ServerAgent
		rc.DNS, rc.DNSAfter = o.DNS, srvCfg.DNSDelay
		r, err := source.NewRemote(ctx, rc)
		if err != nil {
			client.close()
			return nil, nil, fmt.Errorf("observe the server side: %w", err)
		}
		if same(r.Host(), client.src.Host()) {
			// One namespace seen twice would read the load's own
			// connections as the server's: it is the client's, shared.
			r.Close()
			server.shared = client
			server.why = "the agent at " + r.URL() + " observes this same namespace"
			break
		}
		server.src, server.remote = r, r
	case !o.ServerNetNS.Own():
		cfg.NetNS = o.ServerNetNS
		if server.src, err = source.NewLocal(cfg); err != nil {
			client.close()
			return nil, nil, fmt.Errorf("observe the server side: %w", err)
		}
	case local:
		server.shared = client
	default:
		server.why = "the target is not an address of this namespace; pass --server-netns (or run netdoctor on the server) to see its kernel evidence"
	}
	return server, client, nil
}

// same reports whether two sources observe one namespace of one running
// kernel.
func same(a, b evidence.Host) bool {
	return a.BootID != "" && a.BootID == b.BootID && a.NetNSInode != 0 && a.NetNSInode == b.NetNSInode
}

// dnsWatch notes when a server's workers are first seen in a name lookup.
type dnsWatch struct {
	source.Apps
	saw *atomic.Bool
}

func (d *dnsWatch) Sample(ctx context.Context) {
	d.Apps.Sample(ctx)
	for _, smp := range d.Last() {
		if smp.Waits[app.WaitDNS] > 0 {
			d.saw.Store(true)
		}
	}
}

// localTarget reports whether the URL's host is an address of this
// namespace (loopback included).
func localTarget(raw string) bool {
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	ips, err := net.LookupIP(u.Hostname())
	if err != nil {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		if ip.IsLoopback() {
			return true
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.Equal(ip) {
				return true
			}
		}
	}
	return false
}

// probe opens one connection to the target before anything else, so a
// target nobody listens on is a clear error, not a run of refusals. The
// error names what does listen on the server side, when it is observed.
func probe(ctx context.Context, raw string, server *side) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return nil // load.Run reports bad URLs
	}
	addr := net.JoinHostPort(u.Hostname(), targetPort(raw))
	d := net.Dialer{Timeout: 3 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err == nil {
		c.Close()
		return nil
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return nil // slow or unreachable: the load will measure and say so
	}
	there := ""
	if l := server.listeners(); l != "" {
		there = "; listening there: " + l
	}
	return fmt.Errorf("%w: nothing accepts connections on %s (connection refused)%s", ErrNotListening, addr, there)
}

// targetPort is the URL's port, or its scheme's default.
func targetPort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	if p := u.Port(); p != "" {
		return p
	}
	return map[string]string{"http": "80", "https": "443"}[u.Scheme]
}

// Observed is the load window of the side the report is built around
// (the server's, else the client's) and its name; nil and Server when
// neither was observed.
func (res *Result) Observed() (*evidence.Bundle, report.Side) {
	for _, s := range res.Sides {
		if s.Observed {
			return res.Window(s), s.Name
		}
	}
	return nil, report.Server
}

// HTML writes the run's HTML report.
func (res *Result) HTML(w io.Writer, r *report.Run) error {
	b, side := res.Observed()
	return report.RunHTML(w, r, res.LoadStart, b, side)
}
