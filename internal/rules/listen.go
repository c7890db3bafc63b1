package rules

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// Findings of this file.
const (
	AcceptQueueOverflow report.FindingID = "accept-queue-overflow" // its accept queue overflowed: connections were dropped or refused, or a backlog is too small for a burst
	SynQueueOverflow    report.FindingID = "syn-queue-overflow"    // half-open connections overflowed the SYN queue
)

var _ = define(Class{ID: AcceptQueueOverflow,
	// The accept queue: sizing.Backlog's range; the advice table's 4096.
	Tunables: []Tunable{{Name: "net.core.somaxconn", Min: sizing.DefaultSomaxconn, Max: sizing.MaxBacklog, Why: "the kernel's default to the deepest useful accept queue"}},
	Critical: true, Latent: true,
	Errors: true, Delays: true, Drops: true, Fails: FailsAtFront,
	Blocks: true, AtCapacity: true,
	Is: AcceptQueueFull, DropReasons: []string{"TCP_LISTEN_OVERFLOW"}, ListenerDrops: true, Resource: "accept-queue",
	Meaning:    "the application accepts connections more slowly than they arrive; the kernel drops the completed handshakes it cannot queue",
	Active:     "`TcpExtListenOverflows` rose, or a listener sample had Recv-Q ≥ Send-Q (critical)",
	LatentWhen: "a TCP listener's effective backlog (Send-Q) is below 100 (warning)",
	Seed:       "000 stage 3, 003",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´listen´ (´listen.go´). The accept queue holds connections whose handshake completed but that the
application has not ´accept()´ed yet. Its limit, the effective backlog, is ´min(listen() backlog,
net.core.somaxconn)´ and shows as Send-Q of a LISTEN socket; Recv-Q is the queue length.

The rule only runs when the last snapshot has a socket dump (´sockdiag´).

- **Active, critical** when either
  - ´TcpExtListenOverflows´ rose in the window (evidence ´TcpExtListenOverflows +N in 1s (N/s)´, plus
    ´TcpExtListenDrops´ when that rose too), or
  - any snapshot has a listener, of any protocol, with Send-Q > 0 and Recv-Q ≥ Send-Q. The fullest
    sample per listener is quoted: ´listener 10.77.0.2:80 (nginx pid 3677): accept queue 11 of 10 — full;
    effective backlog 10 = ...´. This also works with one snapshot. A queue exactly at its limit (Recv-Q = Send-Q,
    as in seed 000's ´10 10´) counts too and is worded ´— at its limit´: the next connection still fits,
    the one after is dropped (the kernel drops at Recv-Q > Send-Q, worded ´— full´).

  The explanation names the limit. If Send-Q ≥ ´net.core.somaxconn´, it says
  ´effective backlog N = net.core.somaxconn N´. Otherwise it names the application's ´listen()´ backlog,
  as in seed 003. Where listeners count their own drops (sock_diag's SKMEMINFO, kernels since 3.19),
  there is one finding per listener whose own drop counter rose or whose queue a sample caught full,
  each about that listener alone, the one that dropped most first: a busy neighbour is never the
  subject of another service's drops. Without those counters, one finding: its subject is the first
  full listener. If only the counter rose, the subject is the listener whose own drop counter rose
  most, else the non-unix listener with the smallest backlog in the last snapshot, quoted as static
  evidence (´smallest backlog: listener ...´). Its own drops are evidence of their own (´listener ADDR
  (OWNER) dropped N connections in 6s (N/s; its own drop counter, of the namespace's
  TcpExtListenDrops)´).
- **Latent, warning**: when nothing overflowed, one finding for each non-unix listener in the last
  snapshot whose Send-Q is below 100 (seed 003 broke at 50, seed 000 at 10). The subject is its address.
- Fix: a backlog N sized as ´tune plan´ sizes it (´internal/sizing´, one formula for both), from the
  listener's own evidence, never the namespace's: the connections it accepted per second (in ´run´,
  the load's connections opened over its duration, when the load targets it; in ´check´, the
  namespace's ´TcpPassiveOpens´ only when it is the namespace's only TCP listener, else said to be
  uncounted) plus those it dropped (its own drop counter; on a kernel or a bundle without one, the
  namespace's ´TcpExtListenDrops´ when no other listener filled), during a p99 response (at least
  100 ms) and, in ´run´, the load's connections opened at once; doubled, a power of two, never below
  the kernel's default 4096. Each line is the action first, its reason after it: ´net.core.somaxconn=N´
  only when it is below N (it would cap the backlog asked for), then the application's own backlog in
  its own terms — nginx ´listen … backlog=N´, php-fpm ´listen.backlog = N´ (with their file:line in
  ´run´), Python's socketserver ´request_queue_size´, gunicorn's and uvicorn's ´--backlog´, Java's
  ´server.tomcat.accept-count´ or ´ServerSocket´ backlog, Node's ´server.listen({backlog})´, Puma's
  ´?backlog=´; for a Go program, which asks for somaxconn itself, the restart; for a server netdoctor
  cannot tell, what to look for — and its restart; then more workers if the queue still fills. A
  queue already as large as N that still fills gets only that advice. In a run none of whose requests
  failed from the drops, the finding's impact says why (the clients' TCP sent them again, or they
  were another listener's).`,
})

var _ = define(Class{ID: SynQueueOverflow,
	Tunables: []Tunable{{Name: "net.ipv4.tcp_syncookies", Values: []string{"1"}, Why: "the advice table's value"}},
	Critical: true,
	Errors:   true, Delays: true, Latency: true, Drops: true, Fails: FailsAtFront, OnlyWhen: report.Critical,
	Meaning:    "half-open connection requests overflow the listener's SYN queue (flood or tiny backlog)",
	Active:     "`TcpExtTCPReqQFullDrop` rose (critical); only `TcpExtTCPReqQFullDoCookies` rose or a \"SYN flooding\" kernel message (warning)",
	LatentWhen: "none",
	Seed:       "001 §6, 004",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´listen´ (´listen.go´). This needs two snapshots and a socket dump in the last one. It is always
active.

- **Critical** when ´TcpExtTCPReqQFullDrop´ rose: SYNs were dropped.
- **Warning** when only ´TcpExtTCPReqQFullDoCookies´ rose (SYN cookies sent instead of queueing) or
  there are kernel messages of class ´syn-flooding´ (´TCP: request_sock_TCP: Possible SYN flooding on
  port 10.77.0.2:80. Sending cookies.´). The kernel log is shared by every namespace, so only messages
  that name no port, or a port that has a listener in one of the snapshots, are kept.
- Evidence: the counters, at most three kernel lines followed by ´… and N more such kernel messages´,
  ´N half-open (SYN_RECV) sockets at the end of the window´ (SYN_RECV + NEW_SYN_RECV in the last dump),
  and ´net.ipv4.tcp_syncookies = 0´ when the sysctl reads 0 (a sysctl that could not be read is
  never reported as 0, here or in any rule).
- Fix: ´tcp_syncookies=1´ when it reads 0, a larger application backlog (the SYN queue limit follows
  it), and rate limiting or SYNPROXY against a real flood.`,
})

var _ = register(Rule{Name: "listen", Order: 10, Scope: PerSide, IDs: []report.FindingID{AcceptQueueOverflow, SynQueueOverflow}, Checks: "accept and SYN queues", Check: checkListen,
	Watches: []string{"TcpExt.ListenOverflows", "TcpExt.ListenDrops", "TcpExt.TCPReqQFullDrop", "TcpExt.TCPReqQFullDoCookies"}})

// tinyBacklog is the effective backlog below which a listener cannot
// absorb a burst of connections: seed 003 broke at 50, seed 000 at 10.
const tinyBacklog = 100

// checkListen finds accept-queue and SYN-queue overflows. The accept
// queue holds handshakes completed but not yet accept()ed; it overflows
// when the application accepts too slowly for its backlog (ListenOverflows).
// The SYN queue holds half-open requests; it overflows under SYN floods or
// when its backlog-derived limit is tiny (TCPReqQFullDrop/DoCookies).
func checkListen(in *Input) []report.Finding {
	b := in.Bundle
	// In a run, the queue must also hold the load's burst (its
	// connections, opened at once) for as long as its slowest responses.
	burst, p99 := 0, 0.0
	if lr := in.Load(); lr != nil {
		burst, p99 = lr.Connections, lr.Latency.P99.Seconds()
	}
	last := &b.Snapshots[len(b.Snapshots)-1]
	somaxconn, _ := SysctlInt(last, "net.core.somaxconn") // 0: unknown
	var out []report.Finding
	w, ok := b.Window()
	overflows := uint64(0)
	if ok {
		overflows, _ = w.Counter("TcpExt.ListenOverflows")
	}
	full := fullListeners(b)
	var each []evidence.Listener
	if (overflows > 0 || len(full) > 0) && perListenerDrops(b) {
		each = droppedOrFull(b, full)
	}
	// The drop monitor sees the handshakes' last ACKs a full queue
	// dropped; the SYNs it drops are consumed without a reason, so its
	// count is a part of ListenOverflows, never all of it.
	withDrops := func(f report.Finding) report.Finding {
		if items := dropItems(in, "TCP_LISTEN_OVERFLOW"); len(items) > 0 {
			f.Evidence = append(f.Evidence, items...)
			f.Evidence = append(f.Evidence, report.Item{Text: "the drop monitor counts only the handshakes' final ACKs a full queue dropped; the SYNs it refused are freed without a drop reason: TcpExtListenOverflows counts both", Source: dropSource})
		}
		return f
	}
	switch {
	case len(each) > 0:
		// Each listener counts its own drops: one finding for each that
		// dropped or filled, about it alone, the one that dropped most
		// first. The namespace's counters are every listener's.
		for _, l := range each {
			out = append(out, withDrops(acceptOverflow(in, w, onlyAt(full, l), somaxconn, overflows, burst, p99, &l)))
		}
	case overflows > 0 || len(full) > 0:
		out = append(out, withDrops(acceptOverflow(in, w, full, somaxconn, overflows, burst, p99, nil)))
	case last.Sockets != nil:
		for _, l := range last.Sockets.Listeners {
			// Another service's small backlog is not a run's business.
			if l.Proto != "unix" && l.SendQ < tinyBacklog && (in.Run == nil || in.Run.Serves(l.Addr)) {
				out = append(out, tinyBacklogFinding(in, l, somaxconn, burst, p99))
			}
		}
	}
	if in.ServerSide() {
		for i := range out {
			backlogConfig(in, &out[i], burst, p99)
		}
	}
	if ok {
		if f, fired := synOverflow(b, w); fired {
			out = append(out, f)
		}
	}
	return out
}

// fullness words a queue at or over its limit. The kernel refuses a
// connection when Recv-Q > Send-Q (sk_acceptq_is_full); at Recv-Q ==
// Send-Q the next one still fits, and the one after it is dropped.
func fullness(l evidence.Listener) string {
	if l.RecvQ > l.SendQ {
		return "full"
	}
	return "at its limit"
}

// fullListeners returns, per listener, the fullest sample: a queue at its
// limit in any snapshot.
func fullListeners(b *evidence.Bundle) []evidence.Listener {
	worst := map[string]evidence.Listener{}
	var order []string
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, l := range s.Sockets.Listeners {
			if l.SendQ == 0 || l.RecvQ < l.SendQ {
				continue
			}
			k := l.Proto + " " + l.Addr
			if prev, seen := worst[k]; !seen || l.RecvQ > prev.RecvQ {
				if !seen {
					order = append(order, k)
				}
				worst[k] = l
			}
		}
	}
	out := make([]evidence.Listener, 0, len(order))
	for _, k := range order {
		out = append(out, worst[k])
	}
	return out
}

// latest is the last snapshot's entry for listener l, or l.
func latest(b *evidence.Bundle, l evidence.Listener) evidence.Listener {
	out := l
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, sl := range s.Sockets.Listeners {
			if sl.Addr == l.Addr && sl.Proto == l.Proto {
				out = sl
			}
		}
	}
	return out
}

func owner(l evidence.Listener) string {
	if len(l.PIDs) == 0 {
		return "owner unknown"
	}
	ps := make([]string, len(l.PIDs))
	for i, p := range l.PIDs {
		ps[i] = strconv.Itoa(p)
	}
	return fmt.Sprintf("%s pid %s", l.Process, strings.Join(ps, ","))
}

// backlogLimit explains the effective backlog: min(listen() backlog,
// net.core.somaxconn). The application's value is hidden when somaxconn
// caps it, so both must be raised together.
func backlogLimit(l evidence.Listener, somaxconn int64) string {
	if somaxconn <= 0 {
		return fmt.Sprintf("effective backlog %d = min(the application's listen() backlog, net.core.somaxconn, which could not be read)", l.SendQ)
	}
	if int64(l.SendQ) >= somaxconn {
		return fmt.Sprintf("effective backlog %d = net.core.somaxconn %d (the application's listen() backlog is at least as large)", l.SendQ, somaxconn)
	}
	return fmt.Sprintf("effective backlog %d = the application's listen() backlog (net.core.somaxconn is %d)", l.SendQ, somaxconn)
}

// arrivals is what reached one listener a second over the window, from
// its own evidence: the connections it took and those its queue dropped.
type arrivals struct {
	// accepted is the connections a second it took; known is false when
	// they cannot be counted for this listener alone (check, diagnose,
	// or another listener than a run's, in a namespace of several).
	accepted float64
	known    bool
	// dropped is its own drops a second (the listening socket's
	// sk_drops, a SO_REUSEPORT group summed).
	dropped float64
	// how says where each number came from, for the why.
	how string
}

// rate is the connections a second the queue must take in.
func (a arrivals) rate() float64 { return a.accepted + a.dropped }

// listenerArrivals counts what reached l: its own drops over the
// window; the connections it accepted from the run's load when the load
// targets it (the load's connections opened over its duration), or the
// namespace's new connections when l is its only TCP listener. The
// namespace's Tcp.PassiveOpens counts every listener's connections and
// is never given to one of several.
func listenerArrivals(in *Input, l evidence.Listener) arrivals {
	b := in.Bundle
	var a arrivals
	var how []string
	if w, ok := b.Window(); ok && w.Duration() > 0 {
		if lr := in.Load(); lr != nil && in.Run.Serves(l.Addr) && lr.Elapsed > 0 {
			a.accepted, a.known = float64(lr.ConnectionsOpened)/lr.Elapsed.Seconds(), true
			how = append(how, fmt.Sprintf("%.0f/s accepted: the load's %d connections in %.1fs", a.accepted, lr.ConnectionsOpened, lr.Elapsed.Seconds()))
		} else if n := tcpListeners(&b.Snapshots[len(b.Snapshots)-1]); n == 1 {
			a.accepted, a.known = w.Rate("Tcp.PassiveOpens"), true
			how = append(how, fmt.Sprintf("%.0f/s accepted: TcpPassiveOpens, the namespace's only TCP listener's", a.accepted))
		} else {
			how = append(how, fmt.Sprintf("its accepted ones uncounted: the namespace's %.0f/s new connections are shared by %d TCP listeners, and only a load (netdoctor run) counts one's", w.Rate("Tcp.PassiveOpens"), n))
		}
		full := fullListeners(b)
		switch {
		case perListenerDrops(b):
			first, last := listenerDrops(&b.Snapshots[0], l), listenerDrops(&b.Snapshots[len(b.Snapshots)-1], l)
			if last >= first {
				a.dropped = float64(last-first) / w.Duration().Seconds()
			}
			how = append(how, fmt.Sprintf("%.0f/s dropped, by its own count", a.dropped))
		case w.Rate("TcpExt.ListenDrops") == 0:
		case tcpListeners(&b.Snapshots[len(b.Snapshots)-1]) == 1 || len(full) == 1 && full[0].Addr == l.Addr:
			// No count per listener (a kernel before 3.19, or a
			// bundle from before netdoctor read it): the namespace's
			// drops are this listener's when no other could drop.
			a.dropped = w.Rate("TcpExt.ListenDrops")
			how = append(how, fmt.Sprintf("%.0f/s dropped: TcpExtListenDrops, the namespace's, as no other listener filled (no count per listener here)", a.dropped))
		default:
			how = append(how, "its drops uncounted: no count per listener here, and other listeners filled too")
		}
	}
	a.how = strings.Join(how, "; ")
	return a
}

// listenerDrops is l's drop counter in s: every socket listening on its
// address (a SO_REUSEPORT group has one each).
func listenerDrops(s *evidence.Snapshot, l evidence.Listener) uint64 {
	var n uint64
	if s.Sockets == nil {
		return 0
	}
	for _, sl := range s.Sockets.Listeners {
		if sl.Proto == l.Proto && sl.Addr == l.Addr {
			n += sl.Drops
		}
	}
	return n
}

// perListenerDrops reports a bundle whose listeners carry their own drop
// counters: some listener's is not zero (sock_diag's SKMEMINFO; a
// kernel before 3.19, or a bundle from before netdoctor read them, has
// none).
func perListenerDrops(b *evidence.Bundle) bool {
	for _, s := range b.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, l := range s.Sockets.Listeners {
			if l.Drops > 0 {
				return true
			}
		}
	}
	return false
}

// tcpListeners counts the TCP listening addresses of a snapshot.
func tcpListeners(s *evidence.Snapshot) int {
	if s.Sockets == nil {
		return 0
	}
	seen := map[string]bool{}
	for _, l := range s.Sockets.Listeners {
		if l.Proto != "unix" {
			seen[l.Proto+" "+l.Addr] = true
		}
	}
	return len(seen)
}

// backlogFor sizes l's accept queue as tune plan does (sizing.Backlog):
// from the connections that reached l (listenerArrivals) and, when a run
// knows them, the load's burst (connections opened at once) and its p99
// in seconds (0: unknown). why says how it came out.
func backlogFor(in *Input, l evidence.Listener, burst int, p99 float64) (want int, why string) {
	a := listenerArrivals(in, l)
	want, _ = sizing.Backlog(burst, a.rate(), p99)
	return want, sizing.BacklogWhy(burst, a.rate(), a.how, p99)
}

// listenerRuntime is what serves l: the run's server on its address, else its
// owner's command name.
func listenerRuntime(in *Input, l evidence.Listener) (app.RuntimeName, string) {
	for _, s := range in.Servers() {
		if s.Addr != l.Addr {
			continue
		}
		if s.Runtime != nil && s.Runtime.Name != "" {
			return s.Runtime.Name, s.Kind
		}
		return app.RuntimeOf(s.Kind, "", false), s.Kind
	}
	return app.RuntimeOf(l.Process, "", false), l.Process
}

// backlogFix is the advice for l's queue, sized by backlogFor, the
// action first and the reason on its line: net.core.somaxconn only when
// it would cap the backlog asked for (the kernel takes min(listen()
// backlog, somaxconn)); the application's own setting, named for what
// serves l, when the queue is smaller than it must be; and what else to
// look at when the queue is already as large and still fills.
func backlogFix(in *Input, l evidence.Listener, somaxconn int64, burst int, p99 float64) []report.Action {
	b := in.Bundle
	n, size := backlogFor(in, l, burst, p99)
	want := int64(n)
	why := "why " + strconv.FormatInt(want, 10) + ": the queue must hold " + size
	rt, kind := listenerRuntime(in, l)
	var fix []report.Action
	if somaxconn > 0 && somaxconn < want {
		fix = append(fix, sysctlFix(b, "net.core.somaxconn", strconv.FormatInt(want, 10)).Because(why))
		why = ""
	}
	slow := "if the queue still fills, the application accepts too slowly: add workers or find what blocks its accept loop"
	if l.Proto == "unix" {
		slow = "if the queue still fills, the application accepts too slowly: add workers (php-fpm pm.max_children) or find what blocks them"
	}
	if int64(l.SendQ) >= want && (somaxconn <= 0 || somaxconn >= want) {
		// As large as it must be, and full: the backlog is not the fault.
		a := report.Advise(fmt.Sprintf("the queue of %s (%s) is already %d, what the arrivals need: the application accepts too slowly; add workers or find what blocks its accept loop", l.Addr, owner(l), l.SendQ))
		return append(fix, a.Because(why))
	}
	how := app.BacklogSetting(rt, l.Port, n)
	if rt == app.RuntimeGo {
		how = fmt.Sprintf("Go asks listen() for net.core.somaxconn as it was when it first listened (the socket has %d): restart it once somaxconn is at least %d", l.SendQ, want)
	}
	text := fmt.Sprintf("raise the listen() backlog of %s (%s) to %d — %s", l.Addr, owner(l), want, how)
	if kind == "" {
		kind = l.Process
	}
	relisten := report.Relisten(kind, l.Addr, l.PIDs, n, text)
	if why != "" {
		relisten = relisten.Because(why)
	}
	return append(fix, relisten, report.Advise(slow))
}

// droppedOrFull are the listeners whose own drop counter rose in the
// window, or whose queue a sample caught full, most drops first.
func droppedOrFull(b *evidence.Bundle, full []evidence.Listener) []evidence.Listener {
	var out []evidence.Listener
	seen := map[string]bool{}
	add := func(l evidence.Listener) {
		if k := l.Proto + " " + l.Addr; !seen[k] {
			seen[k] = true
			out = append(out, latest(b, l))
		}
	}
	if last := b.Snapshots[len(b.Snapshots)-1].Sockets; last != nil {
		for _, l := range last.Listeners {
			if ownDrops(b, l) > 0 {
				add(l)
			}
		}
	}
	for _, l := range full {
		add(l)
	}
	slices.SortStableFunc(out, func(x, y evidence.Listener) int { return cmp.Compare(ownDrops(b, y), ownDrops(b, x)) })
	return out
}

// ownDrops is how many connections listener l dropped over the bundle,
// by its own counter.
func ownDrops(b *evidence.Bundle, l evidence.Listener) uint64 {
	first, last := listenerDrops(&b.Snapshots[0], l), listenerDrops(&b.Snapshots[len(b.Snapshots)-1], l)
	return last - min(first, last)
}

// onlyAt is full's sample of l, if it has one.
func onlyAt(full []evidence.Listener, l evidence.Listener) []evidence.Listener {
	for _, f := range full {
		if f.Proto == l.Proto && f.Addr == l.Addr {
			return []evidence.Listener{f}
		}
	}
	return nil
}

// acceptOverflow is the finding of an accept queue that overflowed:
// about the listener only names when it is given (each listener counting
// its own drops), else about the one the evidence points at.
func acceptOverflow(in *Input, w evidence.Window, full []evidence.Listener, somaxconn int64, overflows uint64, burst int, p99 float64, only *evidence.Listener) report.Finding {
	b := in.Bundle
	f := report.Finding{ID: AcceptQueueOverflow, Severity: report.Critical, Status: report.Active,
		Title: "Accept queue overflow: connections are dropped because the application does not accept them fast enough"}
	if overflows > 0 {
		it, _ := counterItem(w, "TcpExt.ListenOverflows")
		f.Evidence = append(f.Evidence, it)
		if d, _ := w.Counter("TcpExt.ListenDrops"); d > 0 {
			it, _ := counterItem(w, "TcpExt.ListenDrops")
			f.Evidence = append(f.Evidence, it)
		}
	}
	// The listener named is the one whose own drop counter rose most, a
	// full one first: the namespace's counters are every listener's.
	drops := func(l evidence.Listener) uint64 { return ownDrops(b, l) }
	var subject evidence.Listener
	if only != nil {
		subject = *only
	}
	for i, l := range full {
		if only == nil && (i == 0 || drops(l) > drops(subject)) {
			subject = l
		}
		f.Evidence = append(f.Evidence, report.Item{
			Text:   fmt.Sprintf("listener %s (%s): accept queue %d of %d — %s; %s", l.Addr, owner(l), l.RecvQ, l.SendQ, fullness(l), backlogLimit(l, somaxconn)),
			Source: "sockdiag", Window: true,
		})
	}
	if len(full) == 0 && only == nil {
		// The counter rose but no sample caught a full queue: name the
		// listener that counted drops of its own, else the one with
		// the smallest backlog as the likely one.
		var listeners []evidence.Listener
		if last := b.Snapshots[len(b.Snapshots)-1]; last.Sockets != nil {
			listeners = last.Sockets.Listeners
		}
		for _, l := range listeners {
			if l.Proto != "unix" && (subject.Addr == "" || drops(l) > drops(subject) || drops(l) == drops(subject) && l.SendQ < subject.SendQ) {
				subject = l
			}
		}
		if subject.Addr != "" && drops(subject) == 0 {
			f.Evidence = append(f.Evidence, report.Item{
				Text:   fmt.Sprintf("smallest backlog: listener %s (%s), %s", subject.Addr, owner(subject), backlogLimit(subject, somaxconn)),
				Source: "sockdiag",
			})
		}
	}
	if only != nil && len(full) == 0 {
		// No sample caught its queue full: its limit, as it stands.
		f.Evidence = append(f.Evidence, report.Item{
			Text:   fmt.Sprintf("listener %s (%s): %s", subject.Addr, owner(subject), backlogLimit(subject, somaxconn)),
			Source: "sockdiag",
		})
	}
	if n := drops(subject); n > 0 && w.Duration() > 0 {
		f.Evidence = append(f.Evidence, report.Item{
			Text:   fmt.Sprintf("listener %s (%s) dropped %d connections in %s (%.1f/s; its own drop counter, of the namespace's TcpExtListenDrops)", subject.Addr, owner(subject), n, round(w), float64(n)/w.Duration().Seconds()),
			Source: "sockdiag", Window: true,
		})
	}
	if subject.Addr != "" {
		f.Subject, f.About = subject.Addr, report.About{Listen: subject.Addr}
		// The fix names the listener's owners as last seen: a pool
		// that forks workers under load has more of them by then.
		f.Actions = backlogFix(in, latest(b, subject), somaxconn, burst, p99)
	} else {
		f.Actions = notes("find the listener with `ss -ltn` (Recv-Q > Send-Q) and raise its backlog together with net.core.somaxconn")
	}
	return f
}

func tinyBacklogFinding(in *Input, l evidence.Listener, somaxconn int64, burst int, p99 float64) report.Finding {
	return report.Finding{ID: AcceptQueueOverflow, Severity: report.Warning, Status: report.Latent, Subject: l.Addr, About: report.About{Listen: l.Addr},
		Title: fmt.Sprintf("Listener %s has an accept queue of only %d: a burst of connections will overflow it", l.Addr, l.SendQ),
		Evidence: []report.Item{{
			Text:   fmt.Sprintf("listener %s (%s): accept queue %d of %d; %s", l.Addr, owner(l), l.RecvQ, l.SendQ, backlogLimit(l, somaxconn)),
			Source: "sockdiag",
		}},
		Actions: backlogFix(in, l, somaxconn, burst, p99),
	}
}

// synEarlyDrop finds SYNs dropped before the queue is full: with
// tcp_syncookies 0, tcp_conn_request keeps the last quarter of
// tcp_max_syn_backlog for peers it has talked to before and drops every
// other SYN, counting only ListenDrops (not TCPReqQFullDrop, not
// ListenOverflows). Seed 001 §6's flood stopped at 193 SYN_RECV of 256
// that way.
func synEarlyDrop(b *evidence.Bundle, w evidence.Window, last *evidence.Snapshot) (bool, []report.Item) {
	cookies, ok := SysctlInt(last, "net.ipv4.tcp_syncookies")
	if !ok || cookies != 0 {
		return false, nil
	}
	maxSyn, ok := SysctlInt(last, "net.ipv4.tcp_max_syn_backlog")
	if !ok || maxSyn <= 0 {
		return false, nil
	}
	drops, _ := w.Counter("TcpExt.ListenDrops")
	overflows, _ := w.Counter("TcpExt.ListenOverflows")
	peak := 0
	for _, s := range b.Snapshots {
		if s.Sockets != nil {
			peak = max(peak, s.Sockets.TCP["SYN_RECV"]+s.Sockets.TCP["NEW_SYN_RECV"])
		}
	}
	if full, _ := w.Counter("TcpExt.TCPReqQFullDrop"); full > 0 || drops <= overflows || int64(peak) < maxSyn/2 {
		return false, nil
	}
	it, _ := counterItem(w, "TcpExt.ListenDrops")
	it.Text += fmt.Sprintf(", of which accept-queue overflows %d: the rest are SYNs dropped", overflows)
	return true, []report.Item{it,
		{Text: fmt.Sprintf("%d half-open (SYN_RECV) connections at the peak, tcp_max_syn_backlog %d: with syncookies off the last quarter is kept for peers seen before, every other SYN is dropped", peak, maxSyn), Source: "sockdiag", Window: true},
	}
}

func synOverflow(b *evidence.Bundle, w evidence.Window) (report.Finding, bool) {
	drop, _ := w.Counter("TcpExt.TCPReqQFullDrop")
	cookies, _ := w.Counter("TcpExt.TCPReqQFullDoCookies")
	// The kernel log is shared by every namespace: keep the messages
	// naming a listening socket of this one. The message names the
	// listener's bound address and port (the old form only its port): a
	// neighbour's listener on the same port at its own address is not
	// this namespace's.
	ports := map[int]bool{}
	socks := map[string]bool{}
	for _, s := range b.Snapshots {
		if s.Sockets != nil {
			for _, l := range s.Sockets.Listeners {
				ports[l.Port] = true
				if host, port, err := net.SplitHostPort(l.Addr); err == nil {
					socks[net.JoinHostPort(host, port)] = true
				}
			}
		}
	}
	var floods []evidence.KernelMsg
	for _, m := range b.Kmsg() {
		if m.Class != kmsg.ClassSYNFlooding {
			continue
		}
		if m.Port == 0 || m.Addr == "" && ports[m.Port] || m.Addr != "" && socks[net.JoinHostPort(m.Addr, strconv.Itoa(m.Port))] {
			floods = append(floods, m)
		}
	}
	last := &b.Snapshots[len(b.Snapshots)-1]
	early, earlyItems := synEarlyDrop(b, w, last)
	if drop == 0 && cookies == 0 && len(floods) == 0 && !early {
		return report.Finding{}, false
	}
	f := report.Finding{ID: SynQueueOverflow, Status: report.Active, Severity: report.Warning,
		Title: "SYN queue overflow: half-open connections exceed the listener's SYN backlog"}
	if early {
		f.Severity = report.Critical
		f.Title = "SYN queue overflow: connection requests are dropped"
		f.Evidence = append(f.Evidence, earlyItems...)
	}
	if drop > 0 {
		f.Severity = report.Critical
		f.Title = "SYN queue overflow: connection requests are dropped"
		it, _ := counterItem(w, "TcpExt.TCPReqQFullDrop")
		f.Evidence = append(f.Evidence, it)
	}
	if cookies > 0 {
		it, _ := counterItem(w, "TcpExt.TCPReqQFullDoCookies")
		it.Text += " (SYN cookies answered instead of queueing: connections survive but lose TCP options such as window scaling)"
		f.Evidence = append(f.Evidence, it)
	}
	for i, m := range floods {
		if i == 3 {
			f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("… and %d more such kernel messages", len(floods)-3), Source: "kmsg", Window: true})
			break
		}
		f.Evidence = append(f.Evidence, report.Item{Text: "kernel: " + m.Text, Source: "kmsg", Window: true})
	}
	if last.Sockets != nil && !early {
		if n := last.Sockets.TCP["SYN_RECV"] + last.Sockets.TCP["NEW_SYN_RECV"]; n > 0 {
			f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%d half-open (SYN_RECV) sockets at the end of the window", n), Source: "sockdiag", Window: true})
		}
	}
	if v, ok := SysctlInt(last, "net.ipv4.tcp_syncookies"); ok && v == 0 {
		f.Evidence = append(f.Evidence, settingItem("net.ipv4.tcp_syncookies", "0"))
		f.Actions = append(f.Actions, sysctlFix(b, "net.ipv4.tcp_syncookies", "1"))
	}
	f.Actions = append(f.Actions, notes(
		"raise the application's listen() backlog: the SYN queue's limit follows it (capped by net.core.somaxconn); net.ipv4.tcp_max_syn_backlog only matters with syncookies off",
		"if this is a flood, rate-limit new connections per source (nft `ct state new limit rate ...`) or use SYNPROXY; keep tcp_syncookies=1")...)
	return f, true
}

// backlogConfig adds to an accept-queue finding of a run's server side
// the directive, with file and line, that sets the listener's backlog,
// and the line to change, sized as backlogFix sizes it.
func backlogConfig(in *Input, f *report.Finding, burst int, p99 float64) {
	if f.ID != AcceptQueueOverflow {
		return
	}
	l := evidence.Listener{Addr: f.About.Listen}
	if last := in.Bundle.Snapshots[len(in.Bundle.Snapshots)-1].Sockets; last != nil {
		for _, sl := range last.Listeners {
			if sl.Addr == f.About.Listen {
				l = sl
			}
		}
	}
	want, _ := backlogFor(in, l, burst, p99)
	for _, s := range in.Servers() {
		if s.Addr != f.About.Listen {
			continue
		}
		switch {
		case s.Nginx != nil:
			for _, l := range s.Nginx.Listens {
				// Both are host:port as bound: nginx's "*:80" and
				// "80" are 0.0.0.0:80, as the kernel reports them.
				if l.Addr != f.About.Listen {
					continue
				}
				b := "not set (nginx's default 511)"
				if l.Backlog >= 0 {
					b = fmt.Sprintf("backlog=%d", l.Backlog)
				}
				f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("nginx listen %s %s at %s", l.Addr, b, l.Source), Source: "nginx -T"})
				f.Actions = append(f.Actions, edit("nginx", l.Source,
					fmt.Sprintf("nginx: `listen %s backlog=%d;` at %s (with net.core.somaxconn at least as large), then nginx -s reload", l.Addr, want, l.Source),
					fmt.Sprintf("listen %s backlog=%d;", l.Addr, want)))
			}
		case s.Pool != nil:
			f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("php-fpm pool %s listen.backlog = %s", s.Pool.Name, s.Pool.Backlog), Source: "php-fpm config"})
			f.Actions = append(f.Actions, edit("php-fpm", s.Pool.Backlog.Source,
				fmt.Sprintf("php-fpm: `listen.backlog = %d` in pool %s (%s), then reload php-fpm", want, s.Pool.Name, where(s.Pool.Backlog.Source, s.Config)),
				fmt.Sprintf("listen.backlog = %d", want)))
		}
	}
}
