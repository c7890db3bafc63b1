package tune

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/churn.go: a server that opens a
// connection per request to its upstream. nginx keeps them (reuse);
// another client gets the kernel's tcp_tw_reuse (twReuse).

var _ = planFix(rules.UpstreamConnectionChurn, rankReuse, (*builder).reuse)

// reuse keeps upstream connections open: an nginx keepalive pool sized so
// that every worker can keep its share of the requests in flight, and
// the pass's own switch (fastcgi_keep_conn, HTTP/1.1 without
// "Connection: close").
func (b *builder) reuse(f report.Finding) error {
	if len(f.About.Remotes) == 0 {
		b.note(f, "the report names no destination for it: plan again from a report of this netdoctor (netdoctor diagnose its bundle)")
		return nil
	}
	s, u := b.upstreamOf(f.About.Remotes[0])
	if s == nil {
		return b.twReuse(f)
	}
	if u.Block == "" {
		b.note(f, fmt.Sprintf("%s (%s) names %s directly: define an upstream block for it with keepalive and point %s at it", u.Pass, u.PassSource, u.Target, u.Pass))
		return nil
	}
	if err := b.keepalive(s, u, f); err != nil {
		return err
	}
	if _, _, ok := source(u.PassSource); !ok {
		b.note(f, "where "+u.Pass+" is written is unknown: "+u.Why) // its words, for a person
		return nil
	}
	switch u.Pass {
	case "fastcgi_pass":
		return b.fastcgiKeep(s, u, f)
	case "proxy_pass":
		return b.proxyKeep(s, u, f)
	}
	b.note(f, u.Pass+" cannot keep connections: "+u.Why)
	return nil
}

// keepalive gives the upstream block a keepalive pool unless it has one,
// and records the pool's size for the fixes planned after this one.
func (b *builder) keepalive(s *app.Server, u *app.NginxUpstream, f report.Finding) error {
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
	for _, r := range f.About.Remotes {
		b.keep[r] = k
	}
	return nil
}

// fastcgiKeep turns fastcgi_keep_conn on, and sizes the php-fpm pool
// for the connections nginx will keep.
func (b *builder) fastcgiKeep(s *app.Server, u *app.NginxUpstream, f report.Finding) error {
	if k := u.KeepConn; k != nil && !strings.EqualFold(k.Value, "on") {
		if err := b.setAtPass(s, u, f, *k, "fastcgi_keep_conn", "on", "fastcgi_keep_conn on: without it nginx asks php-fpm to close the connection after each request, keepalive or not"); err != nil {
			return err
		}
	}
	// A php-fpm worker serves one connection until nginx closes it:
	// kept connections pin workers, so the pool must cover them.
	if pool := b.serverAt(f.About.Remotes[0]); pool != nil && pool.Pool != nil {
		return b.sizePool(pool, f)
	}
	return nil
}

// proxyKeep makes nginx speak HTTP/1.1 to the upstream, without
// "Connection: close".
func (b *builder) proxyKeep(s *app.Server, u *app.NginxUpstream, f report.Finding) error {
	if v := u.HTTPVersion; v != nil && v.Value != "1.1" {
		if err := b.setAtPass(s, u, f, *v, "proxy_http_version", "1.1", "proxy_http_version 1.1: HTTP/1.0 closes after each response"); err != nil {
			return err
		}
	}
	if !u.ConnectionClose {
		return nil
	}
	at := app.Param{Source: "default"}
	if u.Connection != nil {
		at = *u.Connection
	}
	return b.setAtPass(s, u, f, at, "proxy_set_header", `Connection ""`, `proxy_set_header Connection "": nginx otherwise sends "Connection: close"`)
}

// setAtPass sets a directive of a pass where nginx has it set (at), else
// adds it after the pass.
func (b *builder) setAtPass(s *app.Server, u *app.NginxUpstream, f report.Finding, at app.Param, directive, args, why string) error {
	if file, line, ok := source(at.Source); ok {
		return b.editNginxAt(s, file, line, f, why, edit{replace: setNginxArgs(directive, args)})
	}
	return b.editNginx(s, u.PassSource, f, why, edit{after: []string{directive + " " + args + ";"}})
}

// twReuse is the kernel's part when no configuration can keep the
// connections (an application's own client): outgoing connections may
// take a TIME_WAIT port older than 1 s. Safe for outgoing connections
// with timestamps on; the default 2 does it for loopback only.
func (b *builder) twReuse(f report.Finding) error {
	cur, ok := b.current("net.ipv4.tcp_tw_reuse")
	if !ok || cur == "1" || (cur == "2" && loopback(f.About.Remotes)) {
		b.note(f, "reuse connections in the application that opens them (a connection pool); the kernel already reuses TIME_WAIT ports for it")
		return nil
	}
	if ts, _ := b.current("net.ipv4.tcp_timestamps"); ts == "0" {
		b.note(f, "tcp_tw_reuse needs tcp_timestamps, which is off (see "+string(rules.RiskySysctl)+")")
	}
	b.note(f, "the lasting fix is a connection pool in the application that connects to "+f.Subject)
	return b.sysctl(f, "net.ipv4.tcp_tw_reuse", "1",
		fmt.Sprintf("%.0f outgoing connections/s to %s, each leaving a port in TIME_WAIT for 60 s; with 1 a new outgoing connection may take a TIME_WAIT port older than 1 s (timestamps protect it); %s covers loopback only", b.rate("TcpActiveOpens"), f.Subject, cur))
}

// loopback reports destinations that are all on the loopback, which
// tcp_tw_reuse's default 2 already covers.
func loopback(addrs []string) bool {
	for _, a := range addrs {
		host, _, err := net.SplitHostPort(a)
		if ip, perr := netip.ParseAddr(host); err != nil || perr != nil || !ip.Unmap().IsLoopback() {
			return false
		}
	}
	return len(addrs) > 0
}
