package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// UpstreamConnectionChurn: a server opens a new connection per request to its upstream.
const UpstreamConnectionChurn report.FindingID = "upstream-connection-churn"

var _ = define(Class{ID: UpstreamConnectionChurn,
	Tunables: []Tunable{{Name: "net.ipv4.tcp_tw_reuse", Values: []string{"1"}, Why: "outgoing connections reuse TIME_WAIT ports"}},
	Critical: true,
	Errors:   true, Fails: Fails5xx,
	Consequences: []Consequence{{Effect: PortsExhausted, At: OwnRemotes}, {Effect: TimeWaitFull}},
	Meaning:      "a new connection per request to one upstream: TIME_WAIT piles up, ports and CPU are spent on connection setup",
	Active:       "≥ 1000 and ≥ a quarter of the range in TIME_WAIT to one remote, with `TcpActiveOpens` ≥ 50/s (warning; critical at ≥ half the range); in a run, an nginx upstream without reuse, or any server opening ≥ 0.5 connections per request (closed by FIN or by reset) or holding a run-out range in TIME_WAIT (warning; critical with nginx's \"Cannot assign\" lines)",
	LatentWhen:   "none",
	Seed:         "000 stages 4–5, 004",
	ReportedBy:   "`check`, `diagnose`, `run`",
	Doc: `Rule ´churn´ (´churn.go´), from three kinds of evidence, strongest first; the first two make one
finding when they see the same destination.

- **From the kernel alone** (check, diagnose, and every side of a run): the remote with the most
  TIME_WAIT (the load's own connections excepted) has at least 1000 of them and at least a quarter of
  the range, while ´TcpActiveOpens´ rose by at least 50 per second: **active, warning**, **critical**
  when TIME_WAIT reaches half the range. Evidence: ´8000 TIME_WAIT and 10 ESTABLISHED connections to
  10.0.0.5:6379´ and ´TcpActiveOpens +1200 in 1s (1200.0/s)´. The subject is the remote.
- **From nginx's configuration** (a run's server side): an upstream without connection reuse while
  ´TcpActiveOpens´ kept pace with the requests answered (≥ 0.5 per request), or nginx logged "Cannot
  assign requested address": **active**, warning, critical with those log lines (each one a 502 the
  client saw, counted in its impact). The fix is the nginx lines, sized as ´tune plan´ sizes them.
- **From the sockets, for any server** (a run's server side, no configuration needed: a home-made
  proxy, haproxy, nginx + Lua): at least 100 requests answered and at least half a new connection per
  request, towards the remote that holds the TIME_WAIT (≥ 100, or ≥ half a small range) when the
  server closes first, or towards the one it talks to when it closes with resets (´TcpOutRsts´
  about ´TcpActiveOpens´, no TIME_WAIT: ports are free at once, so they do not run out, but every
  request pays a handshake); or, when the ports to a remote ran out (connects then fail and open
  nothing), a remote holding the range mostly in TIME_WAIT. **Active, warning.** The evidence says
  how the server closes and, when they differ, how many connects a second were attempted (one per
  request) and how many got a port. ´TcpActiveOpens´ counts every process of the namespace: when the
  run traced the server's own outbound connections and none went to that remote, the finding names
  "a process of this namespace (not SERVER…)" and its rate, not the server.
- Fix: keep-alive to that upstream or a connection pool (per client library, haproxy ´http-reuse´).
  Do not touch ´tcp_fin_timeout´ or ´tcp_tw_recycle´.

In a run with an on-CPU profile, every active churn finding also cites what the profile saw of its cost,
for each server that spent 2 % or more of its samples there: the share setting up outgoing connections
(´tcp_v4_connect´, ´tcp_connect´), and of those the kernel's search for a free local port
(´inet_hash_connect´, ´__inet_hash_connect´, ´__inet_check_established´: seed 000's flame graph, hot when
TIME_WAIT fills the range; on 6.18 with a wide range, a 5 s lab run of seed 000's stage 5 shows it at
about 0.5 % of nginx's samples, with connection setup at 6–10 %).`,
})

var _ = register(Rule{Name: "churn", Order: 40, Scope: PerSide, IDs: []report.FindingID{UpstreamConnectionChurn}, Checks: "connections per request to upstreams", Check: checkChurn})

// checkChurn finds a server that opens a new connection for each
// request to its upstream (seeds 000 and 004), from three kinds of
// evidence, strongest first:
//
//   - in a run, nginx's configuration: an upstream without connection
//     reuse, while Tcp.ActiveOpens keeps pace with the requests (and, when
//     the local ports ran out, nginx's "(99: Cannot assign requested
//     address)");
//   - from the kernel alone, a pile of TIME_WAIT towards one remote while
//     new connections keep being opened;
//   - in a run, about one new connection per request towards the remote
//     holding the TIME_WAIT, from code no configuration shows (nginx + Lua
//     calling redis, connect() per request).
//
// The first two make one finding when they see the same destination.
func checkChurn(in *Input) []report.Finding {
	return withPortSearch(in, churnFindings(in))
}

// churnFindings is checkChurn before the profile's evidence.
func churnFindings(in *Input) []report.Finding {
	var out []report.Finding
	if f, ok := kernelChurn(in); ok {
		f.Side = in.Side
		out = append(out, f)
	}
	if !in.ServerSide() {
		return out
	}
	r := in.Run
	if r.Load == nil || r.Load.Requests == 0 {
		return out
	}
	if _, ok := in.Bundle.Window(); !ok {
		return out
	}
	c := connectsOf(in)
	opens, answered, perReq := c.opens, c.answered, c.perReq
	for _, s := range r.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, u := range s.Nginx.Upstreams {
			if u.Reuse {
				continue
			}
			if f, ok := configChurn(in, s, u, opens, answered, perReq); ok {
				out = upsert(out, f)
			}
		}
	}
	for _, f := range out {
		if f.Status == report.Active {
			return out
		}
	}
	if f, ok := socketChurn(in, c); ok {
		out = append(out, f)
	}
	return out
}

// configChurn is churn as nginx's configuration and log show it.
func configChurn(in *Input, s *app.Server, u app.NginxUpstream, opens, answered uint64, perReq float64) (report.Finding, bool) {
	r := in.Run
	logged, n := logItem(s, app.EventCannotAssign, cannotAssign)
	if perReq < 0.5 && n == 0 {
		return report.Finding{}, false
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("TcpActiveOpens +%d for %d requests answered upstream: %.2f new connections per request", opens, answered, perReq), Source: "TcpActiveOpens", Window: true},
		{Text: fmt.Sprintf("%s %s at %s: %s", u.Pass, u.Target, u.PassSource, u.Why), Source: "nginx -T", Window: false},
	}
	sev := report.Warning
	if n > 0 {
		ev = append(ev, report.Item{Text: logged, Source: "log", Window: true})
		sev = report.Critical
	}
	f := report.Finding{ID: UpstreamConnectionChurn, Severity: sev, Status: report.Active, Side: r.ServerSide(),
		Subject: strings.Join(u.Servers, ","), About: report.About{Server: s.Kind, Listen: s.Addr, Remotes: u.Servers},
		Title:    fmt.Sprintf("nginx opens a new connection per request to upstream %s", u.Target),
		Evidence: ev, Actions: reuseFix(serverBundle(r), u, r.Load.Connections, s.Nginx.Workers())}
	if n > 0 {
		// Each failed connect is one 502 the client saw.
		f.Explains = shareText(uint64(n), r.Load.Status["5xx"], "5xx responses (nginx could not connect upstream)", failures(r.Load))
		f.Failed = min(uint64(n), r.Load.Status["5xx"])
	}
	return f, true
}

// cannotAssign is how nginx's log lines for EADDRNOTAVAIL are named.
const cannotAssign = "“(99: Cannot assign requested address)” connecting upstream"

// socketChurn finds a connection per request that no configuration
// shows, for any server: code that connects to its backend itself (seed
// 004: nginx + Lua calling redis, connect() per request in strace), a
// home-made proxy, haproxy closing each backend connection. The load
// says how many requests there were, so about one new connection for
// each is proof enough, towards the remote that holds the TIME_WAIT when
// this side closes first, or towards the one it talks to when it closes
// with resets. When the ports to a remote ran out, connects failed and
// opened nothing: a remote holding the range in TIME_WAIT is proof then.
func socketChurn(in *Input, c connects) (report.Finding, bool) {
	b := in.Bundle
	var busiest, talked evidence.Remote
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, rm := range s.Sockets.Remotes {
			if in.loadsOwn(rm.Addr) {
				continue
			}
			if rm.TimeWait > busiest.TimeWait {
				busiest = rm
			}
			if rm.Established+rm.Other > talked.Established+talked.Other {
				talked = rm
			}
		}
	}
	size := 0
	if lo, hi, ok := portRange(&b.Snapshots[len(b.Snapshots)-1]); ok {
		size = hi - lo + 1
	}
	perRequest := c.answered >= 100 && c.perReq >= 0.5
	var r evidence.Remote
	switch {
	case perRequest && c.reset && talked.Addr != "":
		r = talked
	case perRequest && busiest.TimeWait >= min(100, max(size/2, 1)):
		r = busiest
	case exhausted(in) && busiest.TimeWait >= 10*(busiest.Established+1):
		r = busiest
	default:
		return report.Finding{}, false
	}
	opened := fmt.Sprintf("TcpActiveOpens +%d for %d requests: %.2f new connections per request", c.opens, c.answered, c.perReq)
	if !perRequest {
		opened = fmt.Sprintf("TcpActiveOpens +%d for %d requests: the ports ran out, so most connects failed before sending a SYN", c.opens, c.answered)
	}
	ev := []report.Item{{Text: opened, Source: "TcpActiveOpens", Window: true}}
	who, other := "The server", false
	for _, s := range in.Run.Servers {
		if s.Role == "front" {
			who = s.Kind
			if s.Traced && !connectsTo(in.Run.Servers, r.Addr) {
				// The namespace's counters are every process's: a
				// server whose own connections were traced, none to
				// r, is not blamed for them.
				who, other = fmt.Sprintf("A process of this namespace (not %s, whose own connections were traced and none went there)", s.Kind), true
				ev = append(ev, report.Item{Text: fmt.Sprintf("%s's outbound connections were traced during the load: none to %s; TcpActiveOpens counts every process of the namespace", s.Kind, r.Addr), Source: "process", Window: true})
			}
		}
	}
	title := fmt.Sprintf("%s opens a new connection per request to %s", who, r.Addr)
	if other {
		title = fmt.Sprintf("%s keeps opening new connections to %s, %.0f a second", who, r.Addr, c.rate)
	}
	hold := "each new connection costs a handshake, a TIME_WAIT slot for 60 s and a search for a free local port: reuse is what raised seed 004 from 3K to 9K TPS"
	if c.reset {
		ev = append(ev, report.Item{Text: fmt.Sprintf("it closes them with a reset: TcpOutRsts +%d for %d opened, and %d in TIME_WAIT towards %s: each port is free again at once, so the range does not run out, but every request pays a handshake", c.resets, c.opens, r.TimeWait, r.Addr), Source: "TcpOutRsts", Window: true})
		title += ", closing each with a reset"
		hold = "each new connection costs a handshake on both ends and a search for a free local port; a reset also drops whatever the peer had not yet read"
	} else {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%d TIME_WAIT and %d ESTABLISHED connections to %s: this side closes first, and each closed connection holds its local port for the TIME_WAIT", r.TimeWait, r.Established, r.Addr), Source: "sockdiag", Window: true})
	}
	if c.attempts > c.rate+1 && exhausted(in) {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%.0f connects a second were attempted (one per request), %.0f got a port", c.attempts, c.rate), Source: "load", Window: true})
	}
	return report.Finding{ID: UpstreamConnectionChurn, Severity: report.Warning, Status: report.Active, Subject: r.Addr, About: report.About{Remotes: []string{r.Addr}},
		Title: title, Evidence: ev,
		Actions: notes(
			"keep connections to "+r.Addr+" open and reuse them: the client library's pool (OpenResty/lua-resty: `red:set_keepalive(10000, 100)` instead of `red:close()`; PHP: persistent connections; Java: a pooled client; Go: one http.Client, bodies read to the end; haproxy: `http-reuse always` without `option httpclose`), or nginx `upstream { keepalive N; }` when nginx itself proxies (N: each worker's share of the requests in flight, "+fmt.Sprint(sizing.MinKeepalive)+"–"+fmt.Sprint(sizing.MaxKeepalive)+")",
			hold,
		)}, true
}

// connectsTo reports a server whose traced connections went to addr.
func connectsTo(servers []*app.Server, addr string) bool {
	for _, s := range servers {
		for _, d := range s.Deps {
			if d.Addr == addr {
				return true
			}
		}
	}
	return false
}

// upsert adds f, or, when the kernel's evidence already made the same
// finding for the same destination, puts f's evidence and fix first in
// it so that one finding carries all the evidence.
func upsert(fs []report.Finding, f report.Finding) []report.Finding {
	for i, k := range fs {
		if k.ID == f.ID && k.Status == report.Active && k.Side == f.Side && (len(k.About.Remotes) == 0 || slices.Contains(f.About.Remotes, k.About.Remotes[0])) {
			f.Evidence = append(f.Evidence, k.Evidence...)
			if report.MoreSevere(k.Severity, f.Severity) {
				f.Severity = k.Severity
			}
			fs[i] = f
			return fs
		}
	}
	return append(fs, f)
}

// kernelChurn reports many short-lived outgoing connections to one
// upstream from the kernel alone: a TIME_WAIT pile-up towards it, large
// against the port range, while new connections keep being opened. On a
// run's client side the load's own connections do not count.
func kernelChurn(in *Input) (report.Finding, bool) {
	b := in.Bundle
	lo, hi, ok := portRange(&b.Snapshots[len(b.Snapshots)-1])
	if !ok {
		return report.Finding{}, false
	}
	size := hi - lo + 1
	r := busiestTimeWait(b, in.loadsOwn)
	w, ok := b.Window()
	if !ok || r.Addr == "" {
		return report.Finding{}, false
	}
	rate := w.Rate("Tcp.ActiveOpens")
	if r.TimeWait < 1000 || r.TimeWait < size/4 || rate < 50 {
		return report.Finding{}, false
	}
	it, _ := counterItem(w, "Tcp.ActiveOpens")
	f := report.Finding{ID: UpstreamConnectionChurn, Severity: report.Warning, Status: report.Active, Subject: r.Addr, About: report.About{Remotes: []string{r.Addr}},
		Title: fmt.Sprintf("A new connection per request to %s: %d in TIME_WAIT, %.0f new connections/s", r.Addr, r.TimeWait, rate),
		Evidence: []report.Item{
			{Text: fmt.Sprintf("%d TIME_WAIT and %d ESTABLISHED connections to %s", r.TimeWait, r.Established, r.Addr), Source: "sockdiag", Window: true},
			it,
		},
		Actions: notes(
			"keep connections to "+r.Addr+" alive and reuse them: nginx `upstream { server "+r.Addr+"; keepalive N; }` (N: each worker's share of the requests in flight, "+fmt.Sprint(sizing.MinKeepalive)+"–"+fmt.Sprint(sizing.MaxKeepalive)+"; `netdoctor run` sizes it) plus `proxy_http_version 1.1; proxy_set_header Connection \"\";` (or `fastcgi_keep_conn on;`); a connection pool in the client library",
			"TIME_WAIT itself is cheap (about 200 bytes each); do not shorten it with tcp_fin_timeout (that is FIN_WAIT_2) or tcp_tw_recycle (removed in 4.12)",
		),
	}
	if r.TimeWait >= size/2 {
		f.Severity = report.Critical
	}
	return f, true
}

// reuseFix is the nginx change that keeps upstream connections open,
// its pool sized as tune plan sizes it: each worker's share of the
// requests in flight. b, the server's snapshots, says where tcp_tw_reuse
// is set.
func reuseFix(b *evidence.Bundle, u app.NginxUpstream, inflight, workers int) []report.Action {
	var fix []report.Action
	k, why := sizing.Keepalive(inflight, workers), sizing.KeepaliveWhy(inflight, workers)
	keepalive := fmt.Sprintf("keepalive %d;", k)
	if u.Block == "" {
		fix = append(fix, edit("nginx", u.PassSource, fmt.Sprintf("define an upstream block for %s with `%s` (%s) and point %s (%s) at it", u.Target, keepalive, why, u.Pass, u.PassSource), keepalive))
	} else if u.Keepalive == 0 {
		fix = append(fix, edit("nginx", u.Block, fmt.Sprintf("add `%s` to upstream %s (%s): %s", keepalive, u.Target, u.Block, why), keepalive))
	}
	switch u.Pass {
	case "fastcgi_pass":
		fix = append(fix, edit("nginx", u.PassSource, fmt.Sprintf("add `fastcgi_keep_conn on;` next to fastcgi_pass (%s)", u.PassSource), "fastcgi_keep_conn on;"))
	case "proxy_pass":
		fix = append(fix, edit("nginx", u.PassSource, fmt.Sprintf("add `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` next to proxy_pass (%s)", u.PassSource),
			"proxy_http_version 1.1;", `proxy_set_header Connection "";`))
	}
	if b == nil {
		b = &evidence.Bundle{}
	}
	tw := sysctlFix(b, "net.ipv4.tcp_tw_reuse", "1")
	return append(fix, tw.Worded("until then, on this kernel: `"+tw.Command+"` lets new connections reuse TIME_WAIT ports (the default 2 does so for loopback only); to keep it: "+
		keepFix(b, "net.ipv4.tcp_tw_reuse", "1")))
}

// busiestTimeWait is the remote with the most TIME_WAIT in any snapshot,
// skipping those skip says are not the side's own.
func busiestTimeWait(b *evidence.Bundle, skip func(string) bool) evidence.Remote {
	var best evidence.Remote
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, r := range s.Sockets.Remotes {
			if r.TimeWait > best.TimeWait && !skip(r.Addr) {
				best = r
			}
		}
	}
	return best
}

// connectShare is the least share of a server's on-CPU samples spent
// setting up outgoing connections (or searching for their local port)
// that churn cites: below it, connections are not what the CPU goes to.
const connectShare = 0.02

// withPortSearch adds to each active churn finding what the on-CPU
// profile saw of its cost, server by server: the share of the samples
// setting up outgoing connections, and of those the kernel's search for
// a free local port (seed 000's flame graph, hot in inet_hash_connect,
// when TIME_WAIT fills the range).
func withPortSearch(in *Input, out []report.Finding) []report.Finding {
	if in.Run == nil || in.Run.Profile == nil || !in.ServerSide() {
		return out
	}
	sum, err := cpuprof.Summarize(in.Run.Profile)
	if err != nil || sum == nil {
		return out
	}
	var items []report.Item
	for _, s := range sum.Servers {
		var conn, search *cpuprof.Activity
		for i, a := range s.Activities {
			switch a.Kind {
			case cpuprof.TCPConnect:
				conn = &s.Activities[i]
			case cpuprof.PortSearch:
				search = &s.Activities[i]
			}
		}
		if (conn == nil || conn.Share < connectShare) && (search == nil || search.Share < connectShare) {
			continue
		}
		text := "the on-CPU profile: "
		if conn != nil {
			text += fmt.Sprintf("%.0f%% of %s's samples set up outgoing connections (%s)", 100*conn.Share, s.Server, strings.Join(conn.Funcs, ", "))
			if search != nil {
				text += fmt.Sprintf(", %.1f%% in the search for a free local port (%s)", 100*search.Share, strings.Join(search.Funcs, ", "))
			}
		} else {
			text += fmt.Sprintf("%.0f%% of %s's samples search for a free local port (%s)", 100*search.Share, s.Server, strings.Join(search.Funcs, ", "))
		}
		items = append(items, report.Item{Text: text + ": the cost of a new connection per request", Source: "profile", Window: true})
	}
	for i := range out {
		if out[i].Status == report.Active {
			out[i].Evidence = append(out[i].Evidence, items...)
		}
	}
	return out
}
