package run

import (
	"fmt"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// upstreamChurn ties nginx's upstream configuration to what the kernel
// and nginx's log show: an upstream without connection reuse opens a
// connection per request (Tcp.ActiveOpens keeps pace with requests), and
// when the local ports run out nginx logs "(99: Cannot assign requested
// address)" and answers 502 (seed 000 stage 4). The kernel-only rule
// needs 1000 TIME_WAIT; with a 51-port range, as in the seed, there are
// never that many, so the configuration and the log carry the proof.
func upstreamChurn(r *Result, fs *[]report.Finding) {
	b := serverBundle(r)
	if b == nil || r.Load == nil || r.Load.Requests == 0 {
		return
	}
	w, ok := Window(b, r.LoadStart).Window()
	if !ok {
		return
	}
	opens, _ := w.Counter("Tcp.ActiveOpens")
	// Requests nginx failed to connect upstream for opened nothing: count
	// the ones that got an answer other than 502.
	answered := r.Load.Requests - min(r.Load.Requests, uint64(logStatuses(r.Servers)[502]))
	if answered == 0 {
		answered = r.Load.Status["2xx"]
	}
	perReq := float64(opens) / float64(max(answered, 1))
	for _, s := range r.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, u := range s.Nginx.Upstreams {
			if u.Reuse {
				continue
			}
			logged, n := logItem(s, app.EventCannotAssign, "“(99: Cannot assign requested address)” connecting upstream")
			if perReq < 0.5 && n == 0 {
				continue
			}
			ev := []report.Item{
				{Text: fmt.Sprintf("Tcp.ActiveOpens +%d for %d requests answered upstream: %.2f new connections per request", opens, answered, perReq), Source: "Tcp.ActiveOpens", Window: true},
				{Text: fmt.Sprintf("%s %s at %s: %s", u.Pass, u.Target, u.PassSource, u.Why), Source: "nginx -T", Window: false},
			}
			sev := report.Warning
			if n > 0 {
				ev = append(ev, report.Item{Text: logged, Source: "log", Window: true})
				sev = report.Critical
				portsFromLog(fs, Window(b, r.LoadStart), serverSide(r), u, logged, r.Load.Status["5xx"])
			}
			f := report.Finding{ID: rules.UpstreamConnectionChurn, Severity: sev, Status: report.Active, Side: serverSide(r),
				Subject:  strings.Join(u.Servers, ","),
				Title:    fmt.Sprintf("nginx opens a new connection per request to upstream %s", u.Target),
				Evidence: ev, Fix: reuseFix(u, r.Load.Connections, s.Nginx.Workers())}
			if n > 0 {
				// Each failed connect is one 502 the client saw.
				f.Explains = shareText(uint64(n), r.Load.Status["5xx"], "5xx responses (nginx could not connect upstream)", failures(r.Load))
			}
			upsert(fs, f)
		}
	}
	churnFromSockets(r, fs, opens, answered, perReq)
}

// churnFromSockets finds a connection per request that no configuration
// shows: code that connects to its backend itself (seed 004: nginx + Lua
// calling redis, connect() per request in strace) and closes after each
// answer. The kernel-only rule waits for a pile of TIME_WAIT large
// against the port range; here the load says how many requests there
// were, so about one new connection for each, towards the one backend
// holding the TIME_WAIT, is proof enough.
func churnFromSockets(r *Result, fs *[]report.Finding, opens, answered uint64, perReq float64) {
	side := serverSide(r)
	for _, f := range *fs {
		if f.ID == rules.UpstreamConnectionChurn && f.Status == report.Active && f.Side == side {
			return
		}
	}
	if answered < 100 || perReq < 0.5 {
		return
	}
	var busiest evidence.Remote
	for _, s := range Window(serverBundle(r), r.LoadStart).Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, rm := range s.Sockets.Remotes {
			if rm.TimeWait > busiest.TimeWait {
				busiest = rm
			}
		}
	}
	if busiest.TimeWait < 100 {
		return
	}
	*fs = append(*fs, report.Finding{ID: rules.UpstreamConnectionChurn, Severity: report.Warning, Status: report.Active, Side: side, Subject: busiest.Addr,
		Title: fmt.Sprintf("The server opens a new connection per request to %s", busiest.Addr),
		Evidence: []report.Item{
			{Text: fmt.Sprintf("Tcp.ActiveOpens +%d for %d requests: %.2f new connections per request", opens, answered, perReq), Source: "Tcp.ActiveOpens", Window: true},
			{Text: fmt.Sprintf("%d TIME_WAIT and %d ESTABLISHED connections to %s", busiest.TimeWait, busiest.Established, busiest.Addr), Source: "sockdiag", Window: true},
		},
		Fix: []string{
			"keep connections to " + busiest.Addr + " open and reuse them: the client library's pool (OpenResty/lua-resty: `red:set_keepalive(10000, 100)` instead of `red:close()`; PHP: persistent connections; Java: a pooled client), or nginx `upstream { keepalive N; }` when nginx itself proxies (N: each worker's share of the requests in flight, " + fmt.Sprint(sizing.MinKeepalive) + "–" + fmt.Sprint(sizing.MaxKeepalive) + ")",
			"each new connection costs a handshake, a TIME_WAIT slot for 60 s and a search for a free local port: reuse is what raised seed 004 from 3K to 9K TPS",
		}})
}

// upsert adds f, or, when the kernel-only rule already reported the same
// finding for the same destination, puts f's evidence and fix first in
// it so that one finding carries all the evidence.
func upsert(fs *[]report.Finding, f report.Finding) {
	for i, k := range *fs {
		if k.ID == f.ID && k.Status == report.Active && k.Side == f.Side && (k.Subject == "" || strings.Contains(f.Subject, k.Subject)) {
			f.Evidence = append(f.Evidence, k.Evidence...)
			if report.MoreSevere(k.Severity, f.Severity) {
				f.Severity = k.Severity
			}
			(*fs)[i] = f
			return
		}
	}
	*fs = append(*fs, f)
}

// reuseFix is the nginx change that keeps upstream connections open,
// its pool sized as tune plan sizes it: each worker's share of the
// requests in flight.
func reuseFix(u app.NginxUpstream, inflight, workers int) []string {
	var fix []string
	k, why := sizing.Keepalive(inflight, workers), sizing.KeepaliveWhy(inflight, workers)
	if u.Block == "" {
		fix = append(fix, fmt.Sprintf("define an upstream block for %s with `keepalive %d;` (%s) and point %s (%s) at it", u.Target, k, why, u.Pass, u.PassSource))
	} else if u.Keepalive == 0 {
		fix = append(fix, fmt.Sprintf("add `keepalive %d;` to upstream %s (%s): %s", k, u.Target, u.Block, why))
	}
	switch u.Pass {
	case "fastcgi_pass":
		fix = append(fix, fmt.Sprintf("add `fastcgi_keep_conn on;` next to fastcgi_pass (%s)", u.PassSource))
	case "proxy_pass":
		fix = append(fix, fmt.Sprintf("add `proxy_http_version 1.1;` and `proxy_set_header Connection \"\";` next to proxy_pass (%s)", u.PassSource))
	}
	fix = append(fix, "until then, on this kernel: `sysctl -w net.ipv4.tcp_tw_reuse=1` lets new connections reuse TIME_WAIT ports (the default 2 does so for loopback only); persist it in /etc/sysctl.d/90-netdoctor.conf")
	return fix
}

// portsFromLog is ephemeral-port-exhaustion on the server side as
// nginx's log saw it: the ports may run out and come back between two
// samples, where the socket counts miss it.
func portsFromLog(fs *[]report.Finding, b *evidence.Bundle, side report.Side, u app.NginxUpstream, logged string, fiveXX uint64) {
	item := report.Item{Text: logged, Source: "log", Window: true}
	for i, k := range *fs {
		if k.ID == rules.EphemeralPortExhaustion && k.Side != report.Client {
			(*fs)[i].Evidence = append([]report.Item{item}, k.Evidence...)
			(*fs)[i].Status, (*fs)[i].Severity = report.Active, report.Critical
			return
		}
	}
	*fs = append(*fs, report.Finding{ID: rules.EphemeralPortExhaustion, Severity: report.Critical, Status: report.Active, Side: side,
		Subject:  strings.Join(u.Servers, ","),
		Title:    fmt.Sprintf("nginx ran out of local ports connecting to %s", strings.Join(u.Servers, ",")),
		Evidence: []report.Item{item, {Text: fmt.Sprintf("the load saw %d 5xx responses", fiveXX), Source: "load", Window: true}},
		Fix:      append(rules.PortFix(b), "the lasting fix: reuse upstream connections (see upstream-connection-churn)")})
}
