package tune

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/listen.go: a full accept queue
// (backlog), a full SYN queue (synQueue), and the sockets that keep
// their old backlog until they listen again (listeners).

var _ = planFix(rules.AcceptQueueOverflow, rankRest, (*builder).backlog)

// backlog raises the accept queue to what the finding's rule sized from
// its listener's own arrivals (its fix's listen action): net.core.somaxconn
// when it would cap that backlog, and the application's own backlog —
// nginx's listen and php-fpm's listen.backlog in their files, any other
// application's setting named in a note, since netdoctor edits only those
// two. Nothing is proposed that is already so ("4096 → 4096"); a queue
// already as large as it must be is noted as an application that accepts
// too slowly.
func (b *builder) backlog(f report.Finding) error {
	want, why := b.backlogWant(f)
	somax, _ := b.current("net.core.somaxconn")
	if atoi(somax) < want {
		if err := b.sysctl(f, "net.core.somaxconn", strconv.Itoa(want), "caps every listen() backlog; "+why); err != nil {
			return err
		}
	} else {
		b.satisfied(f, fmt.Sprintf("net.core.somaxconn is already %s, at least the %d the queue needs", somax, want))
	}
	s := b.serverAt(f.About.Listen)
	switch {
	case s != nil && s.Nginx != nil:
		return b.nginxBacklog(s, f, want, why)
	case s != nil && s.Pool != nil:
		return b.poolBacklog(s, f, want, why)
	}
	b.appBacklog(f, s, want, atoi(somax))
	return nil
}

// backlogWant is the backlog the finding's fix asks for: its listen
// action's, which its rule sized from the listener's own arrivals and
// the load, else its somaxconn's. A report written before fixes were
// data has neither: the queue is sized again from the namespace's
// counters, every listener's, and the reason says so.
func (b *builder) backlogWant(f report.Finding) (int, string) {
	for _, a := range f.Actions {
		if a.Kind == report.ActionListen && a.Backlog > 0 {
			return a.Backlog, fmt.Sprintf("%d, the backlog %s's fix sized from its listener's own arrivals (accepted and dropped connections) and the load's burst and p99", a.Backlog, f.ID)
		}
	}
	for _, a := range f.Actions {
		if a.Kind == report.ActionSysctl && a.Setting == "net.core.somaxconn" && atoi(a.Value) > 0 {
			return atoi(a.Value), fmt.Sprintf("%s, the net.core.somaxconn %s's fix sized from its listener's own arrivals and the load", a.Value, f.ID)
		}
	}
	arrivals := b.rate("TcpPassiveOpens") + b.rate("TcpExtListenDrops")
	p99 := 0.0
	if b.in.Load != nil {
		p99 = time.Duration(b.in.Load.Latency.P99).Seconds()
	}
	burst := b.concurrency()
	want, _ := sizing.Backlog(burst, arrivals, p99)
	return want, "the queue must hold " + sizing.BacklogWhy(burst, arrivals, "the namespace's new connections, every listener's: the report does not say its listener's own", p99)
}

// appBacklog notes what an application netdoctor does not configure
// must change, in its own terms (app.BacklogSetting): the runtime the
// run saw serving the listener, or the process that owns it now.
func (b *builder) appBacklog(f report.Finding, s *app.Server, want, somax int) {
	l, ok := b.listenerAt(f.About.Listen)
	if ok && int(l.SendQ) >= want {
		b.note(f, fmt.Sprintf("not planned, because its accept queue is already %d, what the arrivals need: the application accepts too slowly (add workers, or find what blocks its accept loop)", l.SendQ))
		return
	}
	kernel := fmt.Sprintf("net.core.somaxconn %d already lets it through", somax)
	if somax < want {
		kernel = fmt.Sprintf("with net.core.somaxconn raised to %d above", want)
	}
	if !ok || len(l.PIDs) == 0 {
		b.note(f, fmt.Sprintf("not planned, because the listener's application is unknown: %s (%s)", app.BacklogSetting("", 0, want), kernel))
		return
	}
	rt, kind := b.runtimeAt(s, l)
	if rt == app.RuntimeGo {
		restart := fmt.Sprintf("restart it: net.core.somaxconn is %d now", somax)
		if somax < want {
			restart = fmt.Sprintf("restart it once net.core.somaxconn is raised to %d above", want)
		}
		b.note(f, fmt.Sprintf("not planned, because %s (pid %d) is a Go program, whose net.Listen asks listen() for net.core.somaxconn as it was when it first listened (the socket has %d): %s", kind, l.PIDs[0], l.SendQ, restart))
		return
	}
	b.note(f, fmt.Sprintf("not planned, because netdoctor changes only nginx's and php-fpm's settings: raise %s's (pid %d) listen() backlog from %d to %d — %s (%s)", kind, l.PIDs[0], l.SendQ, want, app.BacklogSetting(rt, l.Port, want), kernel))
}

// runtimeAt is what serves listener l: the runtime the run saw, else the
// process that owns l now, else its command name in the report.
func (b *builder) runtimeAt(s *app.Server, l evidence.Listener) (app.RuntimeName, string) {
	if s != nil && s.Runtime != nil && s.Runtime.Name != "" {
		return s.Runtime.Name, s.Kind
	}
	if pr, err := b.h.Process(l.PIDs[0]); err == nil && (pr.Comm == l.Process || l.Process == "") {
		if pr.Runtime != "" {
			return pr.Runtime, pr.Comm
		}
		return app.RuntimeOf(pr.Comm, strings.ReplaceAll(pr.Cmdline, "\x00", " "), false), pr.Comm
	}
	if s != nil {
		return app.RuntimeOf(s.Kind, "", false), s.Kind
	}
	return app.RuntimeOf(l.Process, "", false), l.Process
}

// listenerAt is the report's listener on addr.
func (b *builder) listenerAt(addr string) (evidence.Listener, bool) {
	for _, l := range b.in.Summary.Listeners {
		if l.Addr == addr && addr != "" {
			return l, true
		}
	}
	return evidence.Listener{}, false
}

// nginxBacklog raises the backlog of nginx's listens on the finding's
// address. nginx listens again on reload when a backlog changed, so
// these sockets are not re-listened (relist).
func (b *builder) nginxBacklog(s *app.Server, f report.Finding, want int, why string) error {
	for _, l := range s.Nginx.Listens {
		if l.Addr != f.About.Listen {
			continue
		}
		if have := l.Backlog; have >= want {
			b.satisfied(f, fmt.Sprintf("nginx's listen %s backlog is already %d (at %s)", l.Addr, have, l.Source))
		} else {
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
	switch {
	case pb.Value < 0:
		b.satisfied(f, fmt.Sprintf("php-fpm pool %s asks listen() for the limit (listen.backlog = -1): net.core.somaxconn alone sets its backlog", s.Pool.Name))
	case pb.Value >= want:
		b.satisfied(f, fmt.Sprintf("php-fpm pool %s's listen.backlog is already %d", s.Pool.Name, pb.Value))
	default:
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

var _ = planFix(rules.SynQueueOverflow, rankRest, (*builder).synQueue)

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
