package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// AppSlow: the application holds requests while the CPU idles.
const AppSlow report.FindingID = "app-slow"

var _ = define(Class{ID: AppSlow,
	Is:     TimeHeld,
	Delays: true, Holds: true,
	Blocks:     true,
	Meaning:    "the server holds requests while CPU and network are idle (locks, sleeps, slow backends)",
	Active:     "load p50 ≥ 30 ms, server CPU < 70 % busy (or the server's threads blocked off CPU ≥ half their accounted busy time), and no other active cause of latency (warning)",
	LatentWhen: "—",
	Seed:       "003 (log lock)",
	ReportedBy: "`run`",
	Doc: `Rule ´appslow´ (´appslow.go´). **Active, warning** when the load's p50 is at least 30 ms over at least 20
requests, the server's CPUs were under 70 % busy over the load (busier, the innermost server's threads must
have spent at least half their accounted busy time blocked off CPU: other work may be what keeps a
host's CPUs busy, and then the title says how much the threads were blocked), and no other active finding explains
latency (worker pool, Nagle, CPU, CPU quota throttling, run-queue contention, conntrack, SYN queue, loss,
bandwidth, a saturated generator), and the time split's largest part of the p50 is not the answers' time
in the server's sockets (in flight, held by a window: the kernel's accounting of the connections wins
over a time held inferred; see cwnd-restart-after-idle). When the innermost server's threads were on CPU
at least half of the load, the title says so instead of "while the CPU idles" (the host may idle, the
server does not). Evidence: the latencies, the idle CPU, and the wait classes of the
innermost server's busy workers (´sleep 92%, running 6%´), and, where the server's threads were accounted
(below), what their busy time went to as the scheduler counts it (´throttled by the CPU quota 88%, on CPU
11%´). The fix follows what the threads did: the largest part of their accounted busy time (the quota, a
CPU others hold, the CPU itself — naming the profile's hottest functions — or the off-CPU wait), else the
dominant wait class: a file lock (seed 003's shared log), a mutex, sleeps in the request path, a
backend's socket, disk; and always how to profile off-CPU time. Tested with php-fpm workers that append
to one log file under ´flock´ and hold it 20 ms, with a throttled Go server whose threads sampled
"running" and on a futex, and (rules' TestAppSlowBusyHost) with a Python server blocked on a lock on a
host other work keeps 90 % busy.`,
})

var _ = register(Rule{Name: "appslow", Order: 230, Scope: Symptom, IDs: []report.FindingID{AppSlow}, Checks: "time held in the application", Check: checkAppSlow})

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
	// The kernel's accounting of the answers wins over a time held
	// inferred: when the largest part of the p50 waited in the server's
	// sockets (in flight, for a window), the application held nothing.
	if ts := TimeSplit(r); ts != nil && len(ts.P50.Parts) > 0 && strings.HasPrefix(ts.P50.Parts[0].Bucket, report.BucketSocket) {
		return nil
	}
	b := serverBundle(r)
	busy, ok := hostBusy(b, r.LoadStart, r.LoadEnd)
	if !ok {
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
	// A busy host is no cause by itself: other work may be what keeps
	// its CPUs busy (a neighbour, a build beside the service). The
	// server's own threads decide then: blocked, off CPU, for most of
	// their busy time, they held requests whatever the host did; on CPU
	// or waiting for one, the CPU rules speak.
	held := 0.0
	if busy >= appSlowHostBusy {
		if s == nil {
			return nil
		}
		if held, ok = heldOffCPU(r, s); !ok || held < appSlowHeld {
			return nil
		}
	}
	host := fmt.Sprintf("server CPU %.0f%% busy, and no queue overflowed nor packet dropped", 100*busy)
	if held > 0 {
		host = fmt.Sprintf("the host's CPUs %.0f%% busy, while the server's threads were blocked off CPU %.0f%% of their busy time; no queue overflowed nor packet dropped", 100*busy, 100*held)
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("responses took p50 %s, p99 %s over %d requests", lr.Latency.P50.Round(time.Millisecond/10), lr.Latency.P99.Round(time.Millisecond/10), lr.Requests), Source: "load", Window: true},
		{Text: host, Source: "/proc/stat", Window: true},
	}
	subject, about := "", report.About{}
	fix := notes("profile where requests wait off-CPU: `perf trace -s -p PID`, bcc's `offcputime -p PID`, or the runtime's own (thread dumps, php-fpm slowlog with request_slowlog_timeout)")
	if s != nil {
		subject, about = s.Kind+" "+s.Addr, report.About{Server: s.Kind, Listen: s.Addr}
		sh, total := waitShares(r.Samples(s))
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s workers, sampled each second while busy: %s", s.Kind, describeWaits(sh, total)), Source: "wchan", Window: true})
		if item, advice, ok := accountedAdvice(r, s); ok {
			// What the threads did, as the scheduler accounts it, wins
			// over the samples of their states: a thread that runs in
			// short bursts between throttled periods is seen "running"
			// or on a futex, and neither says why it is slow.
			ev = append(ev, item)
			if advice != "" {
				fix = append(notes(advice), fix...)
			}
		} else if len(sh) > 0 && 2*sh[0].n >= total {
			fix = append(notes(waitFix[sh[0].class]), fix...)
		}
	}
	for _, sv := range r.Servers {
		if item, n := logItem(sv, app.EventSlow, "slow requests"); n > 0 {
			ev = append(ev, report.Item{Text: item, Source: "log", Window: true})
		}
	}
	title := fmt.Sprintf("The application holds requests (p50 %s) while the CPU idles", lr.Latency.P50.Round(time.Millisecond))
	if held > 0 {
		title = fmt.Sprintf("The application holds requests (p50 %s): its threads are blocked off CPU %.0f%% of their busy time", lr.Latency.P50.Round(time.Millisecond), 100*held)
	} else if s != nil {
		// The host's CPUs may idle while the server's own threads do
		// not: then the CPU is not said to idle.
		w := workerLoadOf(r, s)
		n, _ := parallelism(s, w)
		if on, _ := w.threadsBusy(n); on >= 0.5 {
			title = fmt.Sprintf("The application holds requests (p50 %s); its threads are on CPU %.0f%% of the load", lr.Latency.P50.Round(time.Millisecond), 100*on)
		}
	}
	return []report.Finding{{ID: AppSlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
		Title:    title,
		Evidence: ev, Actions: fix}}
}

// appSlowHostBusy is the host's busy share from which its CPUs may be
// why requests wait, and appSlowHeld the least share of the server's
// accounted busy time its threads must spend blocked for app-slow to be
// named on such a host.
const (
	appSlowHostBusy = 0.7
	appSlowHeld     = 0.5
)

// threadsBusyTime is what server s's threads' busy time went to over the load,
// as the scheduler accounts it (throttled, waiting for a CPU, on CPU,
// off CPU on a wait that holds a request), and its sum; ok is false
// where its threads were not accounted.
func threadsBusyTime(r *evidence.Run, s *app.Server) (map[string]time.Duration, time.Duration, bool) {
	one := &evidence.Run{Load: r.Load, LoadStart: r.LoadStart, LoadEnd: r.LoadEnd, Servers: []*app.Server{s}, Profile: r.Profile}
	tl := r.Load.Timeline
	all := make([]bool, len(tl))
	for i := range all {
		all[i] = true
	}
	b, _, names := threadTime(one, tl, all)
	busy := sumBuckets(b)
	return b, busy, len(names) > 0 && busy > 0
}

// heldOffCPU is the share of server s's accounted busy time its threads
// spent blocked off CPU.
func heldOffCPU(r *evidence.Run, s *app.Server) (float64, bool) {
	b, busy, ok := threadsBusyTime(r, s)
	if !ok {
		return 0, false
	}
	var off time.Duration
	for k, v := range b {
		if strings.HasPrefix(k, report.BucketOffCPU) {
			off += v
		}
	}
	return float64(off) / float64(busy), true
}

// accountedAdvice reads a server's CPU accounting over the load: what
// its threads' busy time went to, and the advice for the largest part.
func accountedAdvice(r *evidence.Run, s *app.Server) (report.Item, string, bool) {
	b, busy, ok := threadsBusyTime(r, s)
	if !ok {
		return report.Item{}, "", false
	}
	type part struct {
		bucket string
		t      time.Duration
	}
	var parts []part
	for k, v := range b {
		parts = append(parts, part{k, v})
	}
	slices.SortFunc(parts, func(a, b part) int { return cmp.Or(cmp.Compare(b.t, a.t), strings.Compare(a.bucket, b.bucket)) })
	var words []string
	for _, p := range parts {
		if share := float64(p.t) / float64(busy); share >= 0.01 {
			words = append(words, fmt.Sprintf("%s %.0f%%", report.BucketName(p.bucket), 100*share))
		}
	}
	item := report.Item{Text: fmt.Sprintf("%s threads' busy time, as the scheduler accounts it: %s", s.Kind, strings.Join(words, ", ")), Source: "schedstat", Window: true}
	top := parts[0].bucket
	switch {
	case top == report.BucketThrottled:
		return item, "the threads wait for their cgroup's CPU quota: raise or remove the limit, and match the runtime's threads to it (see cpu.max or cpu.cfs_quota_us)", true
	case top == report.BucketWaiting:
		return item, "the threads wait for CPUs other processes hold: move those off the server's CPUs or lower their weight", true
	case top == report.BucketOnCPU:
		return item, onCPUAdvice(r, s), true
	case strings.HasPrefix(top, report.BucketOffCPU):
		return item, waitFix[strings.TrimPrefix(top, report.BucketOffCPU)], true
	}
	return item, "", true
}

// onCPUAdvice names the server's hottest functions when a profile has
// them: requests are slow because they take CPU there.
func onCPUAdvice(r *evidence.Run, s *app.Server) string {
	sum, err := cpuprof.Summarize(r.Profile)
	if err == nil && sum != nil {
		for _, ss := range sum.Servers {
			if ss.Server != s.Kind+" "+s.Addr || len(ss.Top) == 0 {
				continue
			}
			var hot []string
			for _, f := range ss.Top[:min(3, len(ss.Top))] {
				h := fmt.Sprintf("%s %.0f%%", f.Name, 100*f.Self)
				if f.Meaning != "" {
					// A stripped library's frame is only its name: its
					// role says what the work is.
					h += " (" + string(f.Meaning) + ")"
				}
				hot = append(hot, h)
			}
			return "workers are on CPU: make the request cheaper where the profile has it hot: " + strings.Join(hot, ", ")
		}
	}
	return waitFix[app.WaitRunning]
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
func waitedOnServer(r *evidence.Run, abouts []report.About) *app.Server {
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
