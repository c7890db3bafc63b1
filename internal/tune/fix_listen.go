package tune

import (
	"fmt"
	"strconv"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/listen.go: a full accept queue
// (backlog), a full SYN queue (synQueue), and the sockets that keep
// their old backlog until they listen again (listeners).

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
	if err := b.sysctl(f, "net.core.somaxconn", strconv.Itoa(want), "caps every listen() backlog; "+why); err != nil {
		return err
	}
	s := b.serverAt(f.About.Listen)
	switch {
	case s == nil:
		b.note(f, fmt.Sprintf("the listener's application is unknown: raise its listen() backlog to %d and restart it (net.core.somaxconn %s → %d caps it only when it listens)", want, somax, want))
	case s.Nginx != nil:
		return b.nginxBacklog(s, f, want, why)
	case s.Pool != nil:
		return b.poolBacklog(s, f, want, why)
	}
	return nil
}

// nginxBacklog raises the backlog of nginx's listens on the finding's
// address. nginx listens again on reload when a backlog changed, so
// these sockets are not re-listened (relist).
func (b *builder) nginxBacklog(s *app.Server, f report.Finding, want int, why string) error {
	for _, l := range s.Nginx.Listens {
		if l.Addr != f.About.Listen {
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
			b.relist[f.About.Listen] = true // nginx re-listens itself
		}
	}
	return nil
}

// poolBacklog raises a php-fpm pool's listen.backlog, unless the pool
// asks listen() for the limit (-1), which somaxconn then sets alone.
func (b *builder) poolBacklog(s *app.Server, f report.Finding, want int, why string) error {
	pb := s.Pool.Backlog
	if pb.Value >= 0 && pb.Value < want {
		return b.editPool(s, "listen.backlog", strconv.Itoa(want), f, fmt.Sprintf("listen.backlog %d → %d: %s", pb.Value, want, why))
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
		asks, ok := b.asks(s, l.Addr)
		if !ok {
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

// asks is the backlog an application asks listen() for on addr (-1: the
// limit), as the plan leaves its configuration; ok is false for an
// application whose configuration netdoctor does not read.
func (b *builder) asks(s *app.Server, addr string) (asks int, ok bool) {
	switch {
	case s.Nginx != nil:
		asks = sizing.NginxBacklog
		for _, nl := range s.Nginx.Listens {
			if nl.Addr == addr && nl.Backlog >= 0 {
				asks = nl.Backlog
			}
		}
		return asks, true
	case s.Pool != nil:
		asks = s.Pool.Backlog.Value
		// A planned listen.backlog is written (and validated) before
		// the listener is set again.
		if v, ok := b.poolPlanned[poolKey(s, "listen.backlog")]; ok {
			asks = atoi(v)
		}
		return asks, true
	}
	return -1, false
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

// synQueue turns syncookies on where they are off: then the SYN queue
// drops at 3/4 of tcp_max_syn_backlog. With them on, the listen backlog
// is the limit, and the accept queue's change covers it.
func (b *builder) synQueue(f report.Finding) error {
	if v, ok := b.current("net.ipv4.tcp_syncookies"); ok && v == "0" {
		return b.sysctl(f, "net.ipv4.tcp_syncookies", "1",
			"with syncookies off a full SYN queue drops connection requests (at 3/4 of tcp_max_syn_backlog); with them on the kernel answers with a cookie instead and the queue limit is the listen backlog")
	}
	b.note(f, "the SYN queue follows the listen backlog (see "+string(rules.AcceptQueueOverflow)+"'s change); raising net.ipv4.tcp_max_syn_backlog does nothing while syncookies are on. A flood needs rate limiting (nft `ct state new limit rate`) or SYNPROXY")
	return nil
}
