package rules

import (
	"fmt"
	"slices"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
)

// AppSlow: the application holds requests while the CPU idles.
const AppSlow report.FindingID = "app-slow"

var _ = define(Class{ID: AppSlow,
	Delays: true, Holds: true,
	Blocks:     true,
	Meaning:    "the server holds requests while CPU and network are idle (locks, sleeps, slow backends)",
	Active:     "load p50 ≥ 30 ms, server CPU < 70 % busy, and no other active cause of latency (warning)",
	LatentWhen: "—",
	Seed:       "003 (log lock)",
	ReportedBy: "`run`",
})

// appSlowLatency is the median below which a response is not called slow:
// a hello-world through nginx and php-fpm answers in about a millisecond,
// and 40 ms is Nagle's signature, which has its own rule.
const appSlowLatency = 30 * time.Millisecond

// checkAppSlow finds a server that holds requests while its CPU idles and the
// kernel dropped nothing: the time goes to waiting inside the
// application (seed 003: threads blocked on a logging lock). Workers'
// wait channels say on what: a lock, a sleep, a backend's socket.
func checkAppSlow(in *Input) []report.Finding {
	r := in.Run
	if r == nil {
		return nil
	}
	found := in.Found
	lr := r.Load
	if lr == nil || lr.Requests < 20 || lr.Latency.P50 < appSlowLatency {
		return nil
	}
	// A server waiting on a dependency names where the time goes, not
	// why: when netdoctor observes that dependency and its workers
	// block, the why is theirs (nginx waits on php-fpm, whose workers
	// wait on a file lock), and this finding goes on about them.
	var waitedOn []report.About
	for _, f := range found {
		if f.Status != report.Active {
			continue
		}
		switch c := ClassOf(f.ID); {
		case c.Waits:
			if len(f.About.Remotes) > 0 {
				waitedOn = append(waitedOn, f.About)
				continue
			}
			return nil
		case c.Latency:
			return nil // a cause of latency already named
		}
	}
	b := r.serverBundle()
	busy, ok := hostBusy(b, r.LoadStart, r.LoadEnd)
	if !ok || busy >= 0.7 {
		return nil
	}
	// The innermost observed server with blocking workers tells most.
	var s *app.Server
	for _, c := range r.Servers {
		if _, total := waitShares(r.Samples(c)); total > 0 && (s == nil || c.Role == "upstream") {
			s = c
		}
	}
	if len(waitedOn) > 0 {
		s = waitedOnServer(r, waitedOn)
		if s == nil {
			return nil // the dependency's finding is as far as the evidence goes
		}
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("responses took p50 %s, p99 %s over %d requests", lr.Latency.P50.Round(time.Millisecond/10), lr.Latency.P99.Round(time.Millisecond/10), lr.Requests), Source: "load", Window: true},
		{Text: fmt.Sprintf("server CPU %.0f%% busy, and no queue overflowed nor packet dropped", 100*busy), Source: "/proc/stat", Window: true},
	}
	subject, about := "", report.About{}
	fix := notes("profile where requests wait off-CPU: `perf trace -s -p PID`, bcc's `offcputime -p PID`, or the runtime's own (thread dumps, php-fpm slowlog with request_slowlog_timeout)")
	if s != nil {
		subject, about = s.Kind+" "+s.Addr, report.About{Server: s.Kind, Listen: s.Addr}
		sh, total := waitShares(r.Samples(s))
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s workers, sampled each second while busy: %s", s.Kind, describeWaits(sh, total)), Source: "wchan", Window: true})
		if len(sh) > 0 && 2*sh[0].n >= total {
			fix = append(notes(waitFix[sh[0].class]), fix...)
		}
	}
	for _, sv := range r.Servers {
		if item, n := logItem(sv, app.EventSlow, "slow requests"); n > 0 {
			ev = append(ev, report.Item{Text: item, Source: "log", Window: true})
		}
	}
	return []report.Finding{{ID: AppSlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
		Title:    fmt.Sprintf("The application holds requests (p50 %s) while the CPU idles", lr.Latency.P50.Round(time.Millisecond)),
		Evidence: ev, Actions: fix}}
}

// waitFix is the advice for the wait that dominates busy workers.
var waitFix = map[string]string{
	app.WaitFile:    "log less (raise the log level), log asynchronously or per worker, and keep locks out of the request path: workers queue on a file lock (flock/fcntl), as on the shared log file of seed 003",
	app.WaitLock:    "find the contended lock (`perf lock`, thread dumps) and shorten what it guards; for PHP, sessions lock per user: call session_write_close() early: workers queue on a mutex (futex)",
	app.WaitSleep:   "remove or shorten the sleeps in the request path (sleep/usleep, retry back-offs, rate limiters): workers sleep there",
	app.WaitDNS:     "point resolv.conf at a local cache (dnsmasq, systemd-resolved, nscd), resolve backends once at start, and take reverse lookups (gethostbyaddr, HostnameLookups, UseDNS) out of the request path: workers wait for name lookups (glibc's resolver polling its nameserver)",
	app.WaitNetwork: "measure that backend's latency, keep connections to it open, add an index or a cache: workers wait on a peer's socket (a database, cache or API)",
	app.WaitDisk:    "check `iostat -x 1`, move logs and sessions off slow disks or into memory: workers wait for disk I/O",
	app.WaitRunning: "profile the workers (`perf record -g -p PID`) and make the request cheaper: they are on CPU",
	app.WaitOther:   "see other_waits in the JSON report for the kernel functions workers wait in",
}

// waitedOnServer is the observed server, with workers seen blocking on
// a wait that names a cause, that a dependency finding's server waits on
// (abouts: the servers that wait, at Listen, and their dependency), the
// innermost when they chain: one that does not wait on another in turn.
func waitedOnServer(r *Run, abouts []report.About) *app.Server {
	var waiting, waitedOn []string
	for _, a := range abouts {
		waiting = append(waiting, a.Listen)
		waitedOn = append(waitedOn, a.Remotes[0])
	}
	var found *app.Server
	for _, c := range r.Servers {
		// Its workers must mostly wait on something that names a cause:
		// a futex is as likely an idle worker (every Go, Java or Node
		// thread parks on one), an unknown wait or the CPU names none.
		sh, total := waitShares(r.Samples(c))
		if total == 0 || !slices.ContainsFunc(waitedOn, func(d string) bool { return listensAt(c.Addr, d) }) ||
			sh[0].class == app.WaitLock || sh[0].class == app.WaitOther || sh[0].class == app.WaitRunning || 2*sh[0].n < total {
			continue
		}
		found = c
		if !slices.Contains(waiting, c.Addr) {
			break
		}
	}
	return found
}
