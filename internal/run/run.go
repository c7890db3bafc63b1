package run

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/collect"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
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
}

// Side is what was observed on one end.
type Side struct {
	Name     report.Side      `json:"name"` // server or client
	NetNS    string           `json:"netns,omitempty"`
	Bundle   *evidence.Bundle `json:"-"`
	Observed bool             `json:"observed"`
	Why      string           `json:"why,omitempty"` // when not observed
}

// Result is a finished run.
type Result struct {
	Load      *load.Result     `json:"load"`
	LoadStart time.Time        `json:"load_start"`
	LoadEnd   time.Time        `json:"load_end"`
	Sides     []*Side          `json:"sides"`
	Findings  []report.Finding `json:"findings"`
	// Shape is the per-second throughput's pattern and what moved with it.
	Shape Shape `json:"shape"`
	// Servers are the applications behind the target port and their
	// upstreams, when the server side was observed.
	Servers []*app.Server `json:"servers,omitempty"`
	port    string        // the target's port
}

// Report is the JSON of `run`: the report contract (verdict, findings,
// host summary of the server side) plus the load result and the sides.
// `tune plan` reads it back (a check report is the same without the
// run's parts).
type Report struct {
	*report.Report
	Load    *load.Result  `json:"load,omitempty"`
	Shape   Shape         `json:"shape"`
	Sides   []*Side       `json:"sides,omitempty"`
	Servers []*app.Server `json:"servers,omitempty"`
}

// Report builds the report around the server side's load window, or the
// client's when the server was not observed.
func (res *Result) Report() *Report {
	var b *evidence.Bundle
	for _, s := range res.Sides {
		if s.Observed && b == nil {
			b = Window(s.Bundle, res.LoadStart)
		}
	}
	if b == nil {
		b = &evidence.Bundle{}
	}
	return &Report{Report: report.New("run", b, res.Findings), Load: res.Load, Shape: res.Shape, Sides: res.Sides, Servers: res.Servers}
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
	server, client, err := sides(o)
	if err != nil {
		return nil, err
	}
	if err := probe(ctx, o.Load.URL, server); err != nil {
		server.close()
		client.close()
		return nil, err
	}
	defer server.close()
	defer client.close()

	res := &Result{port: targetPort(o.Load.URL)}
	obs := server.discover(ctx, res.port)
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, s := range []*sampler{server, client} {
		if s.snap == nil {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); s.run(sctx, o.Interval) }()
	}
	if obs != nil {
		wg.Add(1)
		go func() { defer wg.Done(); sampleApps(sctx, obs, o.Interval) }()
	}
	wait(ctx, o.Baseline)
	res.LoadStart = time.Now()
	lr, lerr := load.Run(ctx, o.Load)
	res.LoadEnd = time.Now()
	if lerr == nil {
		wait(ctx, o.Tail)
	}
	stop()
	wg.Wait()
	if lerr != nil {
		return nil, lerr
	}
	res.Load = lr
	if obs != nil {
		obs.Finish()
		res.Servers = obs.Servers
	}
	for _, s := range []*sampler{server, client} {
		res.Sides = append(res.Sides, s.side())
	}
	res.Findings = diagnose(res)
	return res, nil
}

// wait sleeps for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// sides decides what to observe: the server in its namespace (or in ours
// when the target address is ours), the client in ours.
func sides(o Options) (server, client *sampler, err error) {
	client = &sampler{name: report.Client}
	server = &sampler{name: report.Server, netns: o.ServerNetNS}
	// One probe per side, in the load's first second: evidence of the
	// window, made while the application resolves under load.
	cfg := collect.Config{DNS: o.DNS, DNSEvery: 1 << 30, DNSDelay: o.Baseline + 500*time.Millisecond}
	if client.snap, err = collect.New(cfg); err != nil {
		return nil, nil, fmt.Errorf("observe the client side: %w", err)
	}
	switch {
	case !o.ServerNetNS.Own():
		cfg.NetNS = o.ServerNetNS
		if server.snap, err = collect.New(cfg); err != nil {
			client.close()
			return nil, nil, fmt.Errorf("observe the server side: %w", err)
		}
	case localTarget(o.Load.URL):
		server.shared = client
	default:
		server.why = "the target is not an address of this namespace; pass --server-netns (or run netdoctor on the server) to see its kernel evidence"
	}
	return server, client, nil
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
func probe(ctx context.Context, raw string, server *sampler) error {
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
