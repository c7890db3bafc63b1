package tune

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// Host is the live state a plan starts from: the values apply would
// change, read where apply would write them.
type Host interface {
	// Sysctl reads a setting; an error wrapping fs.ErrNotExist means the
	// kernel (or the namespace) does not have it.
	Sysctl(s Scope, name string) (string, error)
	ReadFile(path string) ([]byte, error)
	Process(pid int) (Proc, error)
	// MemAvailable is /proc/meminfo's MemAvailable in bytes (0: unknown).
	MemAvailable() uint64
}

// Proc is what a reload needs of a master process.
type Proc struct {
	Exe     string
	Cmdline string // NUL-separated, as /proc/PID/cmdline
	Start   uint64
	Comm    string
	Cwd     string
	UID     int
}

// Defaults the sizing falls back on, each the kernel's or the
// application's own.
const (
	fpmSpawnRate       = 32 // pm.max_spawn_rate default: dynamic forks at most this many a second
	twBucketsFloor     = 262144
	loopbackPrefix     = "127."
	defaultPoolRSSMiB  = 32
	memoryShare        = 0.8 // of MemAvailable, at most, for a pool
	burstWindowSeconds = 1.0
)

// builder accumulates a plan.
type builder struct {
	in     *Input
	h      Host
	p      *Plan
	scope  Scope // the server side's namespace
	files  map[string]*fileEdits
	order  []string // files in the order first edited
	somax  int      // the somaxconn the plan ends with (0: unchanged)
	relist map[string]bool
	// keep is the keepalive pool planned per php-fpm address;
	// poolPlanned the numeric pool settings planned.
	keep        map[string]int
	poolPlanned map[string]string
}

// Build computes a plan from a report. name is how the report is named in
// the plan (its path).
func Build(in *Input, name string, h Host) (*Plan, error) {
	b := &builder{in: in, h: h, files: map[string]*fileEdits{}, relist: map[string]bool{}, keep: map[string]int{}, poolPlanned: map[string]string{},
		p: &Plan{Version: Version, Created: time.Now().UTC(), Report: name, Command: in.Command, Kernel: in.Host.Kernel}}
	if in.Load != nil {
		b.p.Target = in.Load.URL
	}
	b.scope = Scope{NetNS: in.Host.NetNS, NetNSInode: in.Host.NetNSInode}
	for _, s := range in.Sides {
		if s.Name == "server" && s.Observed {
			b.scope.NetNS = s.NetNS
		}
	}
	findings := slices.Clone(in.Findings)
	// Connection reuse first: the pool sizing and the port range depend
	// on whether connections will be kept.
	slices.SortStableFunc(findings, func(a, c report.Finding) int { return planRank(a.ID) - planRank(c.ID) })
	for _, f := range findings {
		if f.Side == "client" {
			b.note(f, "seen on the client (the load generator), not on the server: tune that host separately")
			continue
		}
		if err := b.finding(f); err != nil {
			return nil, err
		}
	}
	if err := b.listeners(); err != nil {
		return nil, err
	}
	for _, path := range b.order {
		f, err := b.files[path].file()
		if err != nil {
			return nil, err
		}
		fe := b.files[path]
		b.p.add(Change{Kind: KindFile, Key: "file:" + path, Findings: fe.findings, Why: fe.why, File: f})
	}
	b.p.order()
	b.p.seen(in.Findings)
	if err := checkPlan(b.p, func() int { v, _ := b.current("net.netfilter.nf_conntrack_buckets"); return atoi(v) }); err != nil {
		return nil, fmt.Errorf("internal error: the plan proposes outdated advice: %w", err)
	}
	return b.p, nil
}

func planRank(id report.FindingID) int {
	switch id {
	case rules.UpstreamConnectionChurn:
		return 0
	case rules.WorkerPoolExhausted:
		return 1
	}
	return 2
}

func (b *builder) note(f report.Finding, why string) {
	n := key(f) + ": " + why
	if !slices.Contains(b.p.Notes, n) {
		b.p.Notes = append(b.p.Notes, n)
	}
}

func (b *builder) finding(f report.Finding) error {
	switch f.ID {
	case rules.AcceptQueueOverflow:
		return b.backlog(f)
	case rules.SynQueueOverflow:
		return b.synQueue(f)
	case rules.UpstreamConnectionChurn:
		return b.reuse(f)
	case rules.EphemeralPortExhaustion:
		return b.ports(f)
	case rules.ConntrackTableFull:
		return b.conntrack(f)
	case rules.WorkerPoolExhausted:
		return b.workers(f)
	case rules.NagleDelayedACK:
		return b.nodelay(f)
	case rules.RiskySysctl:
		return b.risky(f, f.Subject)
	case rules.TimewaitBucketOverflow:
		return b.risky(f, "net.ipv4.tcp_max_tw_buckets")
	}
	return b.generic(f)
}

// rate is a counter's per-second rate over the report's window.
func (b *builder) rate(name string) float64 { return b.in.Summary.Rates[name] }

// concurrency is the requests in flight the load asked for.
func (b *builder) concurrency() int {
	if b.in.Load != nil {
		return b.in.Load.Connections
	}
	return 0
}

// sysctl proposes a setting in the server's namespace (or host-wide for a
// global one). Limits only ever go up: a proposal below the current
// value is dropped.
func (b *builder) sysctl(f report.Finding, name, proposed string, why ...string) error {
	sc := b.scope
	if rules.GlobalSysctl(name) {
		sc = Scope{Global: true}
	}
	cur, err := b.h.Sysctl(sc, name)
	if errors.Is(err, netns.ErrNotFound) {
		// Planned away from the host (or after the namespace went): the
		// report's value stands in, and apply checks the live one.
		v, ok := b.in.Summary.Sysctls[name]
		if !ok {
			b.note(f, fmt.Sprintf("%s: %s is not here and the report lacks the value", name, sc))
			return nil
		}
		cur, err = v, nil
		if n := fmt.Sprintf("%s is not here: current values are the report's", sc); !slices.Contains(b.p.Notes, n) {
			b.p.Notes = append(b.p.Notes, n)
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		b.note(f, fmt.Sprintf("%s: this kernel (%s) does not have it", name, sc))
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s (%s): %w", name, sc, err)
	}
	cur = normalize(cur)
	proposed = normalize(proposed)
	if cur == proposed {
		return nil
	}
	if isLimit(name) && !larger(proposed, cur) {
		return nil
	}
	if name == "net.core.somaxconn" {
		b.somax = max(b.somax, atoi(proposed))
	}
	b.p.add(Change{Kind: KindSysctl, Key: "sysctl:" + name + "@" + sc.String(), Findings: []string{key(f)}, Why: why,
		Sysctl: &Sysctl{Name: name, Current: cur, Proposed: proposed, Scope: sc, Persist: name + " = " + proposed}})
	return nil
}

// current reads a setting for sizing, falling back on the report's value.
func (b *builder) current(name string) (string, bool) {
	sc := b.scope
	if rules.GlobalSysctl(name) {
		sc = Scope{Global: true}
	}
	if v, err := b.h.Sysctl(sc, name); err == nil {
		return normalize(v), true
	}
	v, ok := b.in.Summary.Sysctls[name]
	return normalize(v), ok
}

// backlog sizes the accept queue from what arrived: the load's
// connections all at once, and new connections at the observed rate
// during the service's own slowest responses (p99), when the application
// does not accept.
func (b *builder) backlog(f report.Finding) error {
	arrivals := b.rate("Tcp.PassiveOpens") + b.rate("TcpExt.ListenDrops")
	p99 := 0.0
	if b.in.Load != nil {
		p99 = time.Duration(b.in.Load.Latency.P99).Seconds()
	}
	burst := b.concurrency()
	want, _ := sizing.Backlog(burst, arrivals, p99)
	why := fmt.Sprintf("the queue must hold %s (the burst is the load's connections; %.0f/s of the arrivals were dropped)", sizing.BacklogWhy(burst, arrivals, p99), b.rate("TcpExt.ListenDrops"))
	somax, _ := b.current("net.core.somaxconn")
	limit := want
	if err := b.sysctl(f, "net.core.somaxconn", strconv.Itoa(limit), "caps every listen() backlog; "+why); err != nil {
		return err
	}
	s := b.serverAt(f.Subject)
	switch {
	case s == nil:
		b.note(f, fmt.Sprintf("the listener's application is unknown: raise its listen() backlog to %d and restart it (net.core.somaxconn %s → %d caps it only when it listens)", want, somax, limit))
	case s.Nginx != nil:
		for _, l := range s.Nginx.Listens {
			if l.Addr != f.Subject {
				continue
			}
			if have := l.Backlog; have < want {
				old := "nginx's default 511"
				if have >= 0 {
					old = strconv.Itoa(have)
				}
				if err := b.editNginx(s, l.Source, f, fmt.Sprintf("listen %s backlog %s → %d: %s; nginx listens again on reload when the backlog changes", l.Addr, old, want, why),
					edit{replace: nginxListenBacklog(want)}); err != nil {
					return err
				}
				b.relist[f.Subject] = true // nginx re-listens itself
			}
		}
	case s.Pool != nil:
		pb := s.Pool.Backlog
		if pb.Value >= 0 && pb.Value < want {
			if err := b.editPool(s, "listen.backlog", strconv.Itoa(want), f,
				fmt.Sprintf("listen.backlog %d → %d: %s", pb.Value, want, why)); err != nil {
				return err
			}
		}
	}
	return nil
}

// listeners re-listens the known applications' sockets that a raised
// somaxconn would otherwise reach only at their next restart. nginx
// listens again on reload only when a listen's backlog changed; php-fpm's
// reload re-executes the master, which keeps the inherited socket.
func (b *builder) listeners() error {
	if b.somax == 0 {
		return nil
	}
	for _, l := range b.in.Summary.Listeners {
		if b.relist[l.Addr] || l.Proto == "unix" || len(l.PIDs) == 0 {
			continue
		}
		s := b.serverAt(l.Addr)
		if s == nil {
			continue
		}
		asks := -1 // the application's listen() argument; -1: the limit
		switch {
		case s.Nginx != nil:
			asks = sizing.NginxBacklog
			for _, nl := range s.Nginx.Listens {
				if nl.Addr == l.Addr && nl.Backlog >= 0 {
					asks = nl.Backlog
				}
			}
		case s.Pool != nil:
			asks = s.Pool.Backlog.Value
			// A planned listen.backlog is written (and validated) before
			// the listener is set again.
			if v, ok := b.poolPlanned[poolKey(s, "listen.backlog")]; ok {
				asks = atoi(v)
			}
		default:
			continue
		}
		eff := b.somax
		if asks >= 0 && asks < eff {
			eff = asks
		}
		if int(l.SendQ) >= eff {
			continue
		}
		pid := l.PIDs[0]
		if s.Master != 0 {
			pid = s.Master
		}
		pr, err := b.h.Process(pid)
		if err != nil {
			b.p.Notes = append(b.p.Notes, fmt.Sprintf("listener %s: %s pid %d is gone (%v): restart it so listen() takes net.core.somaxconn %d", l.Addr, s.Kind, pid, err, b.somax))
			continue
		}
		b.p.add(Change{Kind: KindListen, Key: "listen:" + l.Addr + "@" + b.scope.String(), Findings: b.somaxFindings(),
			Why:    []string{fmt.Sprintf("the kernel fixed this socket's backlog at %d, min(listen() backlog, net.core.somaxconn), when %s listened; %s would not listen() again short of a restart, so netdoctor calls listen() on the socket itself (pidfd_getfd), as the restart would", l.SendQ, s.Kind, s.Kind)},
			Listen: &Listener{Addr: l.Addr, PID: pid, Start: pr.Start, Comm: pr.Comm, Current: int(l.SendQ), Backlog: asks, Proposed: eff, Scope: b.scope}})
	}
	return nil
}

// somaxFindings are the findings behind the somaxconn change.
func (b *builder) somaxFindings() []string {
	for _, c := range b.p.Changes {
		if c.Sysctl != nil && c.Sysctl.Name == "net.core.somaxconn" {
			return c.Findings
		}
	}
	return nil
}

// synQueue: with syncookies off the SYN queue drops at 3/4 of
// tcp_max_syn_backlog; with them on, the listen backlog is the limit and
// accept-queue-overflow's change covers it.
func (b *builder) synQueue(f report.Finding) error {
	if v, ok := b.current("net.ipv4.tcp_syncookies"); ok && v == "0" {
		return b.sysctl(f, "net.ipv4.tcp_syncookies", "1",
			"with syncookies off a full SYN queue drops connection requests (at 3/4 of tcp_max_syn_backlog); with them on the kernel answers with a cookie instead and the queue limit is the listen backlog")
	}
	b.note(f, "the SYN queue follows the listen backlog (see accept-queue-overflow's change); raising net.ipv4.tcp_max_syn_backlog does nothing while syncookies are on. A flood needs rate limiting (nft `ct state new limit rate`) or SYNPROXY")
	return nil
}

// upstreamOf finds the nginx pass that sends requests to addr.
func (b *builder) upstreamOf(addr string) (*app.Server, *app.NginxUpstream) {
	for _, s := range b.in.Servers {
		if s.Nginx == nil {
			continue
		}
		for i := range s.Nginx.Upstreams {
			if slices.Contains(s.Nginx.Upstreams[i].Servers, addr) {
				return s, &s.Nginx.Upstreams[i]
			}
		}
	}
	return nil, nil
}

func (b *builder) serverAt(addr string) *app.Server {
	for _, s := range b.in.Servers {
		if s.Addr == addr {
			return s
		}
		if s.Pool != nil && s.Pool.Listen == addr {
			return s
		}
		if s.Nginx != nil {
			for _, l := range s.Nginx.Listens {
				if l.Addr == addr {
					return s
				}
			}
		}
	}
	return nil
}

// nginxWorkers is worker_processes (at least 1).
func nginxWorkers(s *app.Server) int {
	if s.Nginx == nil {
		return 1
	}
	return s.Nginx.Workers()
}

// reuse keeps upstream connections open: an nginx keepalive pool sized so
// that every worker can keep its share of the requests in flight, and
// the pass's own switch (fastcgi_keep_conn, HTTP/1.1 without
// "Connection: close").
func (b *builder) reuse(f report.Finding) error {
	s, u := b.upstreamOf(f.Subject)
	if s == nil {
		return b.twReuse(f)
	}
	if u.Block == "" {
		b.note(f, fmt.Sprintf("%s (%s) names %s directly: define an upstream block for it with keepalive and point %s at it", u.Pass, u.PassSource, u.Target, u.Pass))
		return nil
	}
	w := nginxWorkers(s)
	inflight := b.concurrency()
	k := sizing.Keepalive(inflight, w)
	if u.Keepalive == 0 {
		if err := b.editNginx(s, u.Block, f, fmt.Sprintf("upstream %s: %s; nginx then reuses a connection instead of opening one per request", u.Target, sizing.KeepaliveWhy(inflight, w)),
			edit{after: []string{fmt.Sprintf("keepalive %d;", k)}, inside: true}); err != nil {
			return err
		}
	} else {
		k = u.Keepalive
	}
	b.keep[f.Subject] = k
	if _, _, ok := source(u.PassSource); !ok {
		b.note(f, "where "+u.Pass+" is written is unknown: "+u.Why)
		return nil
	}
	set := func(directive, args, why string) error {
		if file, line, ok := positionIn(u.Why, directive); ok {
			return b.editNginxAt(s, file, line, f, why, edit{replace: setNginxArgs(directive, args)})
		}
		return b.editNginx(s, u.PassSource, f, why, edit{after: []string{directive + " " + args + ";"}})
	}
	switch u.Pass {
	case "fastcgi_pass":
		if strings.Contains(u.Why, "fastcgi_keep_conn") {
			if err := set("fastcgi_keep_conn", "on", "fastcgi_keep_conn on: without it nginx asks php-fpm to close the connection after each request, keepalive or not"); err != nil {
				return err
			}
		}
		// A php-fpm worker serves one connection until nginx closes it:
		// kept connections pin workers, so the pool must cover them.
		if pool := b.serverAt(f.Subject); pool != nil && pool.Pool != nil {
			return b.sizePool(pool, f)
		}
	case "proxy_pass":
		if strings.Contains(u.Why, "proxy_http_version") {
			if err := set("proxy_http_version", "1.1", "proxy_http_version 1.1: HTTP/1.0 closes after each response"); err != nil {
				return err
			}
		}
		if strings.Contains(u.Why, "proxy_set_header Connection") {
			if file, line, ok := positionIn(u.Why, "proxy_set_header Connection"); ok {
				return b.editNginxAt(s, file, line, f, `proxy_set_header Connection "": nginx otherwise sends "Connection: close"`,
					edit{replace: setNginxArgs("proxy_set_header", `Connection ""`)})
			}
			return b.editNginx(s, u.PassSource, f, `proxy_set_header Connection "": nginx otherwise sends "Connection: close"`,
				edit{after: []string{`proxy_set_header Connection "";`}})
		}
	default:
		b.note(f, u.Pass+" cannot keep connections: "+u.Why)
	}
	return nil
}

// twReuse is the kernel's part when no configuration can keep the
// connections (an application's own client): outgoing connections may
// take a TIME_WAIT port older than 1 s. Safe for outgoing connections
// with timestamps on; the default 2 does it for loopback only.
func (b *builder) twReuse(f report.Finding) error {
	cur, ok := b.current("net.ipv4.tcp_tw_reuse")
	if !ok || cur == "1" || (cur == "2" && strings.HasPrefix(f.Subject, loopbackPrefix)) {
		b.note(f, "reuse connections in the application that opens them (a connection pool); the kernel already reuses TIME_WAIT ports for it")
		return nil
	}
	if ts, _ := b.current("net.ipv4.tcp_timestamps"); ts == "0" {
		b.note(f, "tcp_tw_reuse needs tcp_timestamps, which is off (see risky-sysctl)")
	}
	b.note(f, "the lasting fix is a connection pool in the application that connects to "+f.Subject)
	return b.sysctl(f, "net.ipv4.tcp_tw_reuse", "1",
		fmt.Sprintf("%.0f outgoing connections/s to %s, each leaving a port in TIME_WAIT for 60 s; with 1 a new outgoing connection may take a TIME_WAIT port older than 1 s (timestamps protect it); %s covers loopback only", b.rate("Tcp.ActiveOpens"), f.Subject, cur))
}

// ports sizes the ephemeral range from the connect rate times the time a
// port stays in TIME_WAIT (60 s; 1 s with tcp_tw_reuse on).
func (b *builder) ports(f report.Finding) error {
	rate := b.rate("Tcp.ActiveOpens")
	reuse, _ := b.current("net.ipv4.tcp_tw_reuse")
	life := sizing.PortHold(reuse == "1")
	cur, _ := b.current("net.ipv4.ip_local_port_range")
	need, lo, hi, widen := sizing.Ports(rate, life, rangeWidth(cur))
	if !widen {
		return nil
	}
	proposed := fmt.Sprintf("%d %d", lo, hi)
	why := fmt.Sprintf("%.0f connections/s × %.0f s in TIME_WAIT × 1.25 = %d ports needed per destination; the range gives %d (it had %d)", rate, life, need, hi+1-lo, rangeWidth(cur))
	if need > hi+1-lo {
		why += "; the range alone cannot hold them: keeping connections open (upstream-connection-churn) is the fix, the range is headroom"
	}
	return b.sysctl(f, "net.ipv4.ip_local_port_range", proposed, why)
}

// conntrack sizes the table from the connections that pass through it:
// every new connection lives there for its TIME_WAIT timeout after it
// closes. Never below the hash table's size, which is what the kernel
// itself sets the maximum to (since 5.15); the hash grows with it so
// that chains stay short (advice.md #9).
func (b *builder) conntrack(f report.Finding) error {
	ct := b.in.Summary.Conntrack
	if ct == nil {
		b.note(f, "the report has no conntrack numbers")
		return nil
	}
	tw := float64(sizing.ConntrackTimeWait)
	if v, ok := b.current("net.netfilter.nf_conntrack_tcp_timeout_time_wait"); ok && atoi(v) > 0 {
		tw = float64(atoi(v))
	}
	rate, flows := b.flows()
	peak := ct.Count
	if f.Status == report.Active {
		peak = max(peak, ct.Max) // the table was full
	}
	buckets := ct.Buckets
	if v, ok := b.current("net.netfilter.nf_conntrack_buckets"); ok && atoi(v) > 0 {
		buckets = uint64(atoi(v))
	}
	want, need := sizing.Conntrack(rate, tw, peak, buckets)
	why := fmt.Sprintf("%.0f new connections/s (%s) × %.0f s (nf_conntrack_tcp_timeout_time_wait) × 1.25 = %d entries; the table was full at %d; never below the hash's %d buckets, which is the kernel's own default maximum: %d (~%d MiB at ~320 B an entry)",
		rate, flows, tw, need, peak, buckets, want, want*320>>20)
	if err := b.sysctl(f, "net.netfilter.nf_conntrack_max", strconv.FormatUint(want, 10), why); err != nil {
		return err
	}
	if want > buckets {
		return b.sysctl(f, "net.netfilter.nf_conntrack_buckets", strconv.FormatUint(want, 10),
			fmt.Sprintf("the hash grows with the maximum (one entry per bucket, as the kernel sizes it), or chains get long and inserts are refused (advice.md #9)"))
	}
	return nil
}

// flows estimates the connections a second that conntrack will see: the
// passive and active opens, a connection between two local sockets
// counted once (conntrack has one entry for it, TCP an open at each
// end), and without those to upstreams the plan keeps open.
func (b *builder) flows() (float64, string) {
	active, passive := b.rate("Tcp.ActiveOpens"), b.rate("Tcp.PassiveOpens")
	local, kept := true, true
	n := 0
	for _, s := range b.in.Servers {
		for _, u := range s.Upstreams {
			n++
			if !strings.HasPrefix(u, loopbackPrefix) && !strings.HasPrefix(u, "unix:") {
				local = false
			}
			if b.keep[u] == 0 {
				kept = false
			}
		}
	}
	if n == 0 {
		return active + passive, fmt.Sprintf("%.0f/s accepted + %.0f/s opened", passive, active)
	}
	switch {
	case local && kept:
		return max(passive-active, 0), fmt.Sprintf("%.0f/s accepted, less the %.0f/s to local upstreams that the plan keeps open", passive, active)
	case local:
		return max(passive, active), fmt.Sprintf("%.0f/s accepted, of which %.0f/s from this host to its local upstreams (one entry each)", passive, active)
	case kept:
		return passive, fmt.Sprintf("%.0f/s accepted; the %.0f/s opened to upstreams will be kept open by the plan", passive, active)
	}
	return active + passive, fmt.Sprintf("%.0f/s accepted + %.0f/s opened", passive, active)
}

// workers sizes a php-fpm pool or nginx's worker_connections.
func (b *builder) workers(f report.Finding) error {
	if strings.HasPrefix(f.Subject, "nginx") {
		return b.nginxConns(f)
	}
	var s *app.Server
	for _, c := range b.in.Servers {
		if c.Pool != nil && strings.HasSuffix(f.Subject, "pool "+c.Pool.Name) {
			s = c
		}
	}
	if s == nil {
		return b.generic(f)
	}
	return b.sizePool(s, f)
}

// sizePool sizes pm.max_children for the requests in flight, and for
// every connection nginx keeps when fastcgi_keep_conn pins a worker to
// each.
func (b *builder) sizePool(s *app.Server, f report.Finding) error {
	p := s.Pool
	planned := atoi(b.poolPlanned[poolKey(s, "pm.max_children")])
	inflight := b.concurrency()
	front, u := b.upstreamOf(s.Addr)
	if front != nil && front.Nginx != nil && inflight > 0 {
		inflight = min(inflight, front.Nginx.Holds())
	}
	if inflight == 0 {
		inflight = 2 * p.MaxChildren.Value
	}
	want, spare := sizing.Pool(inflight, p.MaxChildren.Value)
	why := fmt.Sprintf("%d requests in flight (the load's connections", inflight)
	if front != nil {
		why += ", within what nginx can hold"
	}
	why += fmt.Sprintf(") plus %d spare (an eighth, at least %d, and one for the status page): %d", spare, sizing.PoolSpareMin, want)
	if u != nil && (b.keep[s.Addr] > 0 || u.Reuse) {
		why += fmt.Sprintf("; with fastcgi_keep_conn a worker stays with its nginx connection until nginx closes it, so the pool must cover every connection nginx holds (at most the requests in flight, %d)", inflight)
	}
	rss := p.WorkerRSS
	if rss == 0 {
		rss = defaultPoolRSSMiB << 20
	}
	if avail := b.h.MemAvailable(); avail > 0 {
		budget := int(memoryShare * float64(avail) / float64(rss))
		if want > budget {
			b.note(f, fmt.Sprintf("%d workers at ~%d MiB each do not fit in %d MiB available: capped at %d; add memory or make requests shorter", want, rss>>20, avail>>20, budget))
			want = max(budget, p.MaxChildren.Value)
		}
		why += fmt.Sprintf("; ~%d MiB each, %d MiB in all of %d MiB available", rss>>20, uint64(want)*rss>>20, avail>>20)
	}
	if want <= p.MaxChildren.Value || want <= planned {
		return nil
	}
	if err := b.editPool(s, "pm.max_children", strconv.Itoa(want), f, fmt.Sprintf("pm.max_children %d → %d: %s", p.MaxChildren.Value, want, why)); err != nil {
		return err
	}
	if p.PM != "static" && inflight > fpmSpawnRate*int(burstWindowSeconds) {
		return b.editPool(s, "pm", "static", f, fmt.Sprintf("pm %s → static: the load asked for %d workers at once and pm %s forks at most %d a second (pm.max_spawn_rate; ondemand one per request), so requests wait in the listen queue meanwhile; static keeps all %d (memory above)", p.PM, inflight, p.PM, fpmSpawnRate, want))
	}
	return nil
}

// nginxConns raises worker_connections to the connections a worker
// holds: its share of the clients plus one upstream connection each, and
// worker_rlimit_nofile to twice that.
func (b *builder) nginxConns(f report.Finding) error {
	var s *app.Server
	for _, c := range b.in.Servers {
		if c.Nginx != nil {
			s = c
			break
		}
	}
	if s == nil || b.concurrency() == 0 {
		return b.generic(f)
	}
	w := nginxWorkers(s)
	want, per := sizing.WorkerConnections(b.concurrency(), w)
	wc := s.Nginx.WorkerConnections
	if want <= wc.Value {
		return nil
	}
	why := fmt.Sprintf("%d client connections over %d workers, each with an upstream connection: %d per worker; twice that, rounded up: %d", b.concurrency(), w, per, want)
	if err := b.editNginx(s, wc.Source, f, fmt.Sprintf("worker_connections %d → %d: %s", wc.Value, want, why), edit{replace: setNginxArgs("worker_connections", strconv.Itoa(want))}); err != nil {
		return err
	}
	if rl := s.Nginx.WorkerRlimitNofile; rl.Value < 2*want {
		why := fmt.Sprintf("worker_rlimit_nofile → %d: two descriptors per connection at most", 2*want)
		if _, _, ok := source(rl.Source); ok {
			return b.editNginx(s, rl.Source, f, why, edit{replace: setNginxArgs("worker_rlimit_nofile", strconv.Itoa(2*want))})
		}
		return b.editNginx(s, s.Nginx.WorkerProcesses.Source, f, why, edit{after: []string{fmt.Sprintf("worker_rlimit_nofile %d;", 2*want)}})
	}
	return nil
}

// nodelay turns tcp_nodelay back on where it was turned off.
func (b *builder) nodelay(f report.Finding) error {
	for _, s := range b.in.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, src := range s.Nginx.NoDelayOff {
			if err := b.editNginx(s, src, f, "tcp_nodelay on (nginx's default): with it off, a response's last small segment waits for the client's delayed ACK (~40 ms) on keep-alive connections",
				edit{replace: setNginxArgs("tcp_nodelay", "on")}); err != nil {
				return err
			}
		}
	}
	return nil
}

// risky corrects a setting the advice table marks harmful.
func (b *builder) risky(f report.Finding, name string) error {
	cur, ok := b.current(name)
	if !ok {
		return b.generic(f)
	}
	v, err := strconv.ParseInt(strings.Fields(cur + " 0")[0], 10, 64)
	if err != nil {
		return b.generic(f)
	}
	bad, value, why, known := rules.Risky(name, v)
	if !known {
		return b.generic(f)
	}
	if !bad && f.ID == rules.RiskySysctl {
		return nil // already corrected
	}
	switch name {
	case "net.ipv4.tcp_max_tw_buckets":
		tw := b.in.Summary.TCPStates["TIME_WAIT"]
		want := max(twBucketsFloor, sizing.NextPow2(4*tw))
		if host, err := b.h.Sysctl(Scope{Global: true}, name); err == nil && atoi(host) > want {
			want = atoi(host) // the kernel's default there: half the established hash
		}
		value = strconv.Itoa(want)
		why += fmt.Sprintf("; proposed %s: the larger of %d (the kernel's default with 4 GiB of memory or more, or the host namespace's own value when larger) and four times the %d sockets in TIME_WAIT now", value, twBucketsFloor, tw)
	case "net.core.somaxconn":
		value = strconv.Itoa(max(atoi(value), b.somax))
	}
	return b.sysctl(f, name, value, name+": "+why)
}

var sysctlW = regexp.MustCompile(`sysctl -w ([a-z0-9_.]+)=("[^"]*"|\S+)`)

// generic takes the setting the finding's rule computed from its
// evidence, when its fix names one.
func (b *builder) generic(f report.Finding) error {
	for _, fix := range f.Fix {
		m := sysctlW.FindStringSubmatch(fix)
		if m == nil {
			continue
		}
		return b.sysctl(f, m[1], strings.Trim(m[2], `"`), fmt.Sprintf("%s: the value %s's rule computed from its evidence (%s)", m[1], f.ID, evidenceText(f)))
	}
	if len(f.Fix) > 0 {
		b.note(f, "no automatic change: "+f.Fix[0])
	}
	return nil
}

func evidenceText(f report.Finding) string {
	var t []string
	for _, e := range f.Evidence {
		if e.Window {
			t = append(t, e.Text)
		}
	}
	if len(t) == 0 && len(f.Evidence) > 0 {
		t = append(t, f.Evidence[0].Text)
	}
	return strings.Join(t, "; ")
}

// editNginx adds an edit at a "file:line" source of an nginx server.
func (b *builder) editNginx(s *app.Server, src string, f report.Finding, why string, e edit) error {
	file, line, ok := source(src)
	if !ok {
		b.note(f, fmt.Sprintf("where to write it is unknown (%q): %s", src, why))
		return nil
	}
	return b.editNginxAt(s, file, line, f, why, e)
}

func (b *builder) editNginxAt(s *app.Server, file string, line int, f report.Finding, why string, e edit) error {
	fe, err := b.fileFor(s, file, f, why)
	if err != nil || fe == nil {
		return err
	}
	e.line = line
	fe.edits = append(fe.edits, e)
	return nil
}

// editPool sets key = value in a php-fpm pool: where the pool sets it,
// else next to its pm.max_children (which every pool must set).
func (b *builder) editPool(s *app.Server, k, value string, f report.Finding, why string) error {
	file := poolFile(s)
	if b.poolPlanned[poolKey(s, k)] == value {
		return nil
	}
	fe, err := b.fileFor(s, file, f, why)
	if err != nil || fe == nil {
		return err
	}
	b.poolPlanned[poolKey(s, k)] = value
	if line := iniKeyLine(fe.old, s.Pool.Name, k); line > 0 {
		fe.edits = append(fe.edits, edit{line: line, replace: setINI(k, value)})
		return nil
	}
	_, line, ok := source(s.Pool.MaxChildren.Source)
	if !ok {
		b.note(f, fmt.Sprintf("where pool %s is written is unknown: set %s = %s by hand", s.Pool.Name, k, value))
		return nil
	}
	fe.edits = append(fe.edits, edit{line: line, after: []string{k + " = " + value}})
	return nil
}

func poolKey(s *app.Server, k string) string { return s.Addr + "|" + k }

// poolFile is the file that defines a pool: where its pm.max_children is.
func poolFile(s *app.Server) string {
	if file, _, ok := source(s.Pool.MaxChildren.Source); ok {
		return file
	}
	return s.Config
}

// fileFor returns the edits of a file, reading it and working out how to
// validate and reload it the first time. nil without error: the file
// cannot be edited (noted).
func (b *builder) fileFor(s *app.Server, file string, f report.Finding, why string) (*fileEdits, error) {
	if fe, ok := b.files[file]; ok {
		fe.addReason(f, why)
		return fe, nil
	}
	old, err := b.h.ReadFile(file)
	if err != nil {
		b.note(f, fmt.Sprintf("cannot read %s (%v): %s", file, err, why))
		return nil, nil
	}
	pid := s.Master
	if pid == 0 && len(s.PIDs) > 0 {
		pid = s.PIDs[0]
	}
	pr, err := b.h.Process(pid)
	if err != nil {
		b.note(f, fmt.Sprintf("%s master pid %d is gone (%v): %s", s.Kind, pid, err, why))
		return nil, nil
	}
	fe := &fileEdits{path: file, app: s.Kind, old: old}
	switch {
	case s.Nginx != nil:
		inv, _ := nginx.ParseMaster(pr.Cmdline)
		v := []string{pr.Exe, "-t", "-q"}
		if p := inv.Prefix; p != "" {
			// A relative -p was taken from the master's working
			// directory; the check runs from ours.
			if !filepath.IsAbs(p) && pr.Cwd != "" {
				p = filepath.Join(pr.Cwd, p)
			}
			v = append(v, "-p", p)
		}
		v = append(v, "-c", s.Config)
		if g := inv.Globals; g != "" {
			v = append(v, "-g", g)
		}
		fe.validate, fe.reload = v, Reload{PID: pid, Start: pr.Start, Exe: pr.Exe, Signal: "HUP"}
	case s.Pool != nil:
		fe.validate = []string{pr.Exe, "-t", "-y", s.Config}
		if pr.UID == 0 {
			// A master running as root keeps a pool without `user` only
			// when started with -R, which its reload keeps (php-fpm
			// re-executes itself with its own arguments).
			fe.validate = append(fe.validate, "-R")
		}
		fe.reload = Reload{PID: pid, Start: pr.Start, Exe: pr.Exe, Signal: "USR2"}
	default:
		b.note(f, fmt.Sprintf("%s: netdoctor does not edit %s's configuration: %s", file, s.Kind, why))
		return nil, nil
	}
	fe.addReason(f, why)
	b.files[file] = fe
	b.order = append(b.order, file)
	return fe, nil
}

func (fe *fileEdits) addReason(f report.Finding, why string) {
	if !slices.Contains(fe.findings, key(f)) {
		fe.findings = append(fe.findings, key(f))
	}
	if why != "" && !slices.Contains(fe.why, why) {
		fe.why = append(fe.why, why)
	}
}

// normalize writes a multi-value setting ("20000\t20050") with single
// spaces.
func normalize(v string) string { return strings.Join(strings.Fields(v), " ") }

func atoi(s string) int {
	n, _ := strconv.Atoi(strings.Fields(s + " 0")[0])
	return n
}

// isLimit is a setting that bounds a resource: it only ever goes up.
func isLimit(name string) bool {
	switch name {
	case "net.core.somaxconn", "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets",
		"net.ipv4.tcp_max_tw_buckets", "fs.file-max", "fs.nr_open", "net.core.netdev_max_backlog",
		"net.ipv4.tcp_max_syn_backlog", "net.core.rmem_max", "net.core.wmem_max", "net.ipv4.ip_local_port_range":
		return true
	}
	return false
}

// larger compares two values of one setting: numbers by value, a port
// range by width.
func larger(a, b string) bool {
	if strings.Contains(a, " ") || strings.Contains(b, " ") {
		if fa, fb := strings.Fields(a), strings.Fields(b); len(fa) == 2 && len(fb) == 2 {
			return rangeWidth(a) > rangeWidth(b)
		}
		return a > b
	}
	x, e1 := strconv.ParseInt(a, 10, 64)
	y, e2 := strconv.ParseInt(b, 10, 64)
	if e1 != nil || e2 != nil {
		return a > b
	}
	return x > y
}

func rangeWidth(v string) int {
	f := strings.Fields(v)
	if len(f) != 2 {
		return 0
	}
	return atoi(f[1]) - atoi(f[0]) + 1
}
