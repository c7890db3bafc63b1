package rules

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// AppConnectionLimit: the application stopped accepting at a ceiling of its own while its queue filled.
const AppConnectionLimit report.FindingID = "app-connection-limit"

var _ = define(Class{ID: AppConnectionLimit,
	Critical: true,
	Errors:   true, Delays: true, Fails: FailsConnections,
	Consequences: []Consequence{{Effect: AcceptQueueFull, At: OwnListener}}, Blocks: true, AtCapacity: true,
	Meaning:    "the application holds at most N connections and accepts no more (haproxy `maxconn`, Node `server.maxConnections`, Tomcat `maxConnections`, envoy `max_connections`, a Python server's own ceiling): new connections wait in the accept queue, and overflow it, while its threads idle",
	Active:     "in at least 2 sampled seconds of the load the port's accepted connections (ESTABLISHED and CLOSE_WAIT minus the accept queues) sat at their ceiling N (the most held while the queue was full; within a tenth below it), fewer than the load's connections, while connections waited in the accept queue (full, or dropped on the listener), and the server's threads were mostly idle through the load (critical)",
	LatentWhen: "—",
	Seed:       "an application's own connection ceiling",
	ReportedBy: "`run`",
	Doc: `Rule ´connlimit´ (´connlimit.go´). It reads the socket snapshots of the load window for the
followed server's port: the accepted connections are the port's ESTABLISHED and CLOSE_WAIT connections
less those still in its listeners' accept queues (a connection its client gave up on, a load's timeout,
is CLOSE_WAIT and keeps its place in the queue or among those the server holds until the server accepts
or closes it: ESTABLISHED alone read a ceiling of 20 as 11 to 13 on a slow machine). The ceiling N is the most accepted connections in a second whose queue
was full (else in one where any waited): a look reads the queue and the ESTABLISHED sockets one after
the other, and while connections still arrive the second count runs ahead of the first. **Active,
critical** when N (or, after it, up to a tenth below it, as ending connections leave it; a server that
accepts slowly climbs to its most instead) was held in at least 2
sampled seconds, N is below the load's connections, in those seconds connections waited
in an accept queue (at least one waiting, and the queue full or the listener dropping during the
window), and the server's threads were mostly idle through the load (fewer than half running in at
least two and most of the server's samples in the load's window): the application is refusing to take
more, not too slow to. A process at its
open-file limit (´fd-limit´, accept fails with EMFILE) is left to that rule. Title: ´python3 on
10.0.0.1:8080 accepts at most 20 connections: 20 accepted while 20 waited in its accept queue (of 20) and
its threads idled´; evidence the accepted connections and the queue in each second, and the drops. The
fix names the knob where the server is known (haproxy ´maxconn´, nginx ´worker_connections´ × workers,
Tomcat ´maxConnections´, Node ´server.maxConnections´, gunicorn ´--worker-connections´, envoy
´max_connections´), else the application's own ceiling; a bigger backlog only lets more wait. For an
haproxy whose configuration root controls (its -f files, package haproxy), the maxconn that caps the
listener (a bind's, the frontend's or the defaults' it inherits, the global one) is read with its
file:line: where it equals the ceiling seen, the evidence names it and the fix is that line, raised above
the load's connections. Tested (TestRunConnCeiling) with a Python server that stops accepting at 20
connections under 48: named with 20; with a ceiling of 200, nothing; and (TestRunHAProxyMaxconn) with
haproxy's frontend maxconn 20 under 48: named as haproxy's, with its line; with maxconn 4096, nothing.`,
})

var _ = register(Rule{Name: "connlimit", Order: 187, Scope: PerRun, IDs: []report.FindingID{AppConnectionLimit}, Checks: "the application's own connection ceiling", Check: checkConnLimit})

// connSecond is one snapshot of the port's listeners.
type connSecond struct {
	t                time.Time
	accepted, queued int
	full             bool
	backlog          uint32
}

// checkConnLimit finds an application holding its accepted connections
// at a ceiling of its own while its accept queue fills and its threads
// idle: the proxy whose frontend takes 20 connections, whose overflow
// would otherwise be blamed on the backlog alone.
func checkConnLimit(in *Input) []report.Finding {
	r := in.Run
	if r == nil || r.Load == nil || r.Load.Connections == 0 {
		return nil
	}
	w := r.Window(r.Server())
	if w == nil {
		return nil
	}
	var out []report.Finding
	for _, s := range r.Servers {
		if s.Role != "front" {
			continue
		}
		_, p, err := splitPort(s.Addr)
		if err != nil {
			continue
		}
		if f, ok := connLimit(r, s, w, p); ok {
			out = append(out, f)
		}
	}
	return out
}

func splitPort(addr string) (string, int, error) {
	i := strings.LastIndexByte(addr, ':')
	if i < 0 {
		return "", 0, fmt.Errorf("no port in %q", addr)
	}
	p, err := strconv.Atoi(addr[i+1:])
	return addr[:i], p, err
}

func connLimit(r *evidence.Run, s *app.Server, w *evidence.Bundle, port int) (report.Finding, bool) {
	var secs []connSecond
	var drops0, drops1 uint64
	first := true
	for _, snap := range w.Snapshots {
		if snap.Sockets == nil || snap.Time.After(r.LoadEnd) {
			continue
		}
		c := connSecond{t: snap.Time, accepted: -1}
		var drops uint64
		for _, l := range snap.Sockets.Listeners {
			if l.Proto == "unix" || l.Port != port {
				continue
			}
			if c.accepted < 0 {
				// The connections on the port, the accept queue's
				// among them: ESTABLISHED, and CLOSE_WAIT, whose
				// clients gave up (a load's timeout) while they
				// waited in the queue or while the server held them,
				// and which take a place in either until the server
				// accepts or closes them. ESTABLISHED alone read a
				// python server's ceiling of 20 as 11 to 13 on a slow
				// pass (CI), its queue full of connections timed out.
				c.accepted = l.Established + l.CloseWait
			}
			c.queued += int(l.RecvQ)
			c.backlog += l.SendQ
			c.full = c.full || l.RecvQ >= l.SendQ
			drops += l.Drops
		}
		if c.accepted < 0 {
			continue
		}
		if first {
			drops0, first = drops, false
		}
		drops1 = drops
		c.accepted -= c.queued
		secs = append(secs, c)
	}
	peak := ceiling(secs)
	if peak <= 0 || peak >= r.Load.Connections {
		return report.Finding{}, false
	}
	dropped := drops1 - drops0
	// The looks at the ceiling, and once it was reached those within a
	// tenth below it (at least one connection), as connections that end
	// leave it for a moment: a server that accepts slowly climbs to its
	// most, it does not stay there.
	slack := max(1, peak/10)
	var at []connSecond
	reached := false
	for _, c := range secs {
		if c.queued == 0 || (!c.full && dropped == 0) {
			continue
		}
		if c.accepted == peak || reached && c.accepted < peak && c.accepted >= peak-slack {
			reached = true
			at = append(at, c)
		}
	}
	if len(at) < 2 || !threadsIdle(r, s) || atFDLimit(w, s) {
		return report.Finding{}, false
	}
	last := at[len(at)-1]
	var per []string
	for _, c := range secs {
		per = append(per, fmt.Sprintf("%d+%d", c.accepted, c.queued))
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("accepted + waiting in the accept queue, each second of the load: %s (%d connections in the load)", strings.Join(per, " "), r.Load.Connections), Source: "sock_diag", Window: true},
		{Text: fmt.Sprintf("the port's listeners dropped %d connections during the load", dropped), Source: "sock_diag", Window: true},
		{Text: fmt.Sprintf("%s's threads were mostly idle through the load", s.Kind), Source: "wchan", Window: true},
	}
	if h := s.HAProxy; h != nil && h.Maxconn != nil && h.Maxconn.Value == peak {
		// The accounting and the configuration agree: the ceiling is
		// that maxconn, named where it is written.
		ev = append(ev, report.Item{Text: fmt.Sprintf("haproxy's maxconn %d (%s) at %s: the ceiling held", h.Maxconn.Value, haproxyScope(h), h.Maxconn.Source), Source: "config"})
	}
	return report.Finding{ID: AppConnectionLimit, Severity: report.Critical, Status: report.Active,
		Subject: fmt.Sprintf("%s on %s", s.Kind, s.Addr), About: report.About{Server: s.Kind, Listen: s.Addr}, Side: r.ServerSide(),
		Title: fmt.Sprintf("%s on %s accepts at most %d connections: %d accepted while %d waited in its accept queue (of %d) and its threads idled",
			s.Kind, s.Addr, peak, peak, last.queued, last.backlog),
		Evidence: ev,
		Actions:  append(connLimitFix(s, peak, r.Load.Connections), report.Advise("a bigger listen backlog only lets more connections wait: raise the ceiling, or spread the load over more instances")),
	}, true
}

// ceiling is the most connections the application held while its
// accept queue was full, or, with no full look, while any waited. A
// look reads the listener's queue and the port's ESTABLISHED sockets one
// after the other: while the load's connections arrive, those that
// completed their handshake in between count as accepted (41 sockets
// ESTABLISHED read against a queue of 18 read a moment before: 23 for a
// ceiling of 20), so the looks whose queue was still filling are not
// the ceiling's, and a full queue's are.
func ceiling(secs []connSecond) int {
	full, waited := -1, -1
	for _, c := range secs {
		if c.queued == 0 {
			continue
		}
		waited = max(waited, c.accepted)
		if c.full {
			full = max(full, c.accepted)
		}
	}
	if full > 0 {
		return full
	}
	return waited
}

// threadsIdle: the server's threads idled through the load: in most of
// its samples in the load's window (at least two), fewer than half of
// them ran. A single-threaded server that runs at one look (taking the
// first connections, or closing them as the load ends) still refuses
// more than it is too slow to take; one that runs at most of them is
// too slow, not refusing.
func threadsIdle(r *evidence.Run, s *app.Server) bool {
	idle, busy := 0, 0
	for _, smp := range s.Samples {
		if smp.Time.Before(r.LoadStart) || smp.Time.After(r.LoadEnd) {
			continue
		}
		total := 0
		for _, v := range smp.Waits {
			total += v
		}
		switch {
		case total == 0:
		case 2*smp.Waits[app.WaitRunning] < total:
			idle++
		default:
			busy++
		}
	}
	return idle >= 2 && idle > busy
}

// atFDLimit: one of the server's processes came within a tenth of its
// open-file limit, where accept fails with EMFILE (fd-limit's).
func atFDLimit(w *evidence.Bundle, s *app.Server) bool {
	for _, snap := range w.Snapshots {
		for _, p := range snap.Processes {
			for _, pid := range s.PIDs {
				if p.PID == pid && p.NofileSoft > 0 && p.OpenFDs >= 0 && uint64(p.OpenFDs)*10 >= p.NofileSoft*9 {
					return true
				}
			}
		}
	}
	return false
}

// connLimitFix names the knob of the servers netdoctor knows; for an
// haproxy whose configuration was read, the maxconn that holds the
// listener, where it is written, and a value above the load's
// connections (each proxied connection takes two descriptors: the
// global maxconn and the open-file limit must allow it too).
func connLimitFix(s *app.Server, n, load int) []report.Action {
	switch {
	case s.Nginx != nil:
		return notes(fmt.Sprintf("raise nginx's worker_connections × worker_processes (%d connections held)", n))
	case s.HAProxy != nil && s.HAProxy.Maxconn != nil && s.HAProxy.Maxconn.Value == n:
		h := s.HAProxy
		want := max(4096, 2*load)
		where := haproxyScope(h)
		return []report.Action{
			edit("haproxy", h.Maxconn.Source, fmt.Sprintf("raise haproxy's maxconn %d in %s at %s to %d (at least the connections it must hold at once), then reload haproxy", n, where, h.Maxconn.Source, want), fmt.Sprintf("maxconn %d", want)),
			report.Advise(fmt.Sprintf("haproxy holds two descriptors a proxied connection: keep the global maxconn and its open-file limit (ulimit-n, LimitNOFILE) above %d connections", want)),
		}
	case s.Kind == "haproxy":
		return notes(fmt.Sprintf("raise haproxy's maxconn (global, frontend or bind) above %d", n))
	case s.Runtime != nil && s.Runtime.Name == app.RuntimeNode:
		return notes(fmt.Sprintf("raise Node's server.maxConnections above %d", n))
	case s.Runtime != nil && s.Runtime.Name == app.RuntimeJava:
		return notes(fmt.Sprintf("raise Tomcat's maxConnections (or the server's own connection limit) above %d", n))
	case s.Kind == "envoy":
		return notes(fmt.Sprintf("raise envoy's max_connections above %d", n))
	}
	return notes(fmt.Sprintf("raise %s's own limit of %d connections (its configuration or code caps the connections it accepts)", s.Kind, n))
}

// haproxyScope says where an haproxy's maxconn is written, for a person.
func haproxyScope(h *app.HAProxyInfo) string {
	switch h.MaxconnScope {
	case "frontend":
		return "frontend " + h.Frontend
	case "bind":
		return "frontend " + h.Frontend + "'s bind line"
	case "defaults":
		return "the defaults section frontend " + h.Frontend + " inherits it from"
	}
	return h.MaxconnScope + " section"
}
