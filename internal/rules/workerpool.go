package rules

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// WorkerPoolExhausted: every worker of an application pool was busy while requests queued.
const WorkerPoolExhausted report.FindingID = "worker-pool-exhausted"

var _ = define(Class{ID: WorkerPoolExhausted,
	Critical: true,
	Errors:   true, Delays: true, Holds: true, Latency: true, Fails: Fails5xx,
	Consequences: []Consequence{{Effect: AcceptQueueFull, At: OwnListener}}, Blocks: true, AtCapacity: true,
	Is: WorkersFull, Resource: "worker-pool",
	Meaning:    "the application's worker pool (php-fpm `pm.max_children`, nginx `worker_connections`, a JVM executor, Tomcat's threads, or any server's threads) is full; requests queue or time out",
	Active:     "php-fpm logged \"reached pm.max_children\", or every worker was busy for ≥ 2 s while requests queued on the pool's socket; nginx logged \"worker_connections are not enough\"; named threads (`pool-1-thread-N`, `http-nio-8080-exec-N`): all of a family busy (in any wait but the one each idled in outside the load, off the CPU) in ≥ half the load's seconds while Little's law puts more requests in flight than threads, queue or not; other servers: its most busy threads all busy off-CPU for ≥ 2 s (at least half their time off it by the process's schedstat, or the host's CPU under 70 % without it) while requests waited unread, p50 ≥ 3 service times (critical)",
	LatentWhen: "—",
	Seed:       "000 stage 2, and any thread pool",
	ReportedBy: "`run`",
	Doc: `Rule ´workerpool´ (´workerpool.go´). **A pool of named threads, in any runtime that names them** (a JVM
executor's ´pool-1-thread-N´, Tomcat's ´http-nio-8080-exec-N´, Jetty's ´qtp…´, a native program's):
threads that share a name but for its number take turns at the same work. Each second, every thread
of the server's processes that carries a name of its own is sampled (´threads´ in a sample's JSON):
its wait class, what it is blocked in (the system call and its first argument from
´/proc/PID/task/TID/syscall´, ´timed´ for a futex wait with a timeout), and, reading a connection, its
peer; threads a runtime names for itself (the JVM's GC, compiler, VM and housekeeping threads, its HTTP
server's dispatcher, Node's V8 workers) are left out. A thread is busy when it runs or waits in
anything but the wait it idled in outside the load (the baseline's and the tail's samples): an idle
executor worker parks on its own condition variable (glibc alternates between two futex words of it),
a busy one sleeps on another (´Thread.sleep´), waits for a connection (a timed park), or reads a
socket. **Active, critical** when all the threads of one family were busy in at least 2 sampled
seconds and half of the load's, mostly off the CPU on waits more workers would overlap (a timed wait, a
peer's socket, a sleep, a lookup, the disk), while more requests were in flight than the family has
threads (Little's law from the load: rate × mean latency), whether or not a queue shows in the kernel
(an executor's queue is inside the JVM). Title: ´java on ADDR serves with a pool of 4 threads
(pool-1-thread-*), all busy: requests wait for a free one (mean 255ms, 234ms of it waiting; service
21ms)´; evidence what the workers waited on, the requests in flight against the threads, the service
time (busy workers / throughput) and the wait; the fix sizes the pool to the requests in flight plus
an eighth and names the knob from the threads' names (the JDK executor's
´Executors.newFixedThreadPool(n)´/´ThreadPoolExecutor´, Tomcat's ´maxThreads´, Jetty's
´QueuedThreadPool´, Undertow's worker threads, a ´ForkJoinPool´'s parallelism, gRPC's executor).
Tested (TestRunPoolJVM) with a ´com.sun.net.httpserver´ service on ´Executors.newFixedThreadPool(4)´
holding each request 20 ms: named with its size and knob; with 64 workers, nothing.

**For any other server, from its threads and sockets alone** (a Python or
Java thread pool, gunicorn's workers, a Go or Node service that bounds its concurrency): the pool is the
most worker threads seen busy at once in at least 2 sampled seconds (threads in an idle wait, on a
futex, which may be an idle worker waiting for work, or in an unknown kernel function do not count; one
second that caught one more thread passing through — an acceptor on the CPU — does not set the size).
**Active, critical** when all of them were busy in at least 2 sampled seconds, mostly blocked off the CPU on waits more workers would
overlap (a sleep, a peer's socket, a name lookup, the disk: not one lock, which more workers would only
queue on, nor the CPU), while requests waited unread in their connections or in the accept queue
(sock_diag's per-port count of connections with Recv-Q > 0) in at least 2 seconds, the server's CPUs
were under 70 % busy, and the pool is smaller than the load's connections. The latency then
decomposes: the service time is the busy workers over the throughput (Little's law), and a p50 of at
least three service times is time waiting for a worker: ´service time ≈ 50ms (4.0 busy workers on
average / 80 requests/s); responses took p50 620ms = 12 × the service time´. Fix: a pool of the
requests in flight plus an eighth (at least 4), with where each runtime sets it, or shortening what
each request holds a worker for.

For a php-fpm pool: **active, critical** when php-fpm logged "server
reached pm.max_children" during the run, or when, in at least 2 sampled seconds, every worker was busy
(the status page's active = total, else every worker thread outside its accept wait) while requests
queued (the status page's listen queue, or the pool listener's Recv-Q in the socket samples). Evidence:
the log line and count, the seconds all workers were busy with ´pm.max_children = N (file:line)´, the
queue peak, what the busy workers waited on, nginx's 504/499 counts and "upstream timed out" lines, and
the server's CPU when it idled. Fix: ´pm.max_children = N → M´ at its file:line, M as ´tune plan´
sizes it: the run's concurrency (capped by what the nginx in front holds), an eighth spare (at least 4)
and one for the status page, at least twice N, with the workers' resident memory times M; and, when the workers mostly
waited rather than ran, shortening that wait. For nginx, "worker_connections are not enough" in its log
raises the same ID with ´worker_connections´ at its line. Tested with a dynamic pool of 2 workers whose
requests sleep 100 ms under 40 connections.`,
})

var _ = register(Rule{Name: "workerpool", Order: 190, Scope: PerRun, IDs: []report.FindingID{WorkerPoolExhausted}, Checks: "worker pools", Check: checkWorkerPool})

// checkWorkerPool finds application worker pools that were full during the
// load: seed 000 stage 2, php-fpm "server reached pm.max_children setting
// (5)" while nginx answered 499s. The pool's own words (its log line, its
// status page) or every worker seen busy while requests queued on its
// socket are the evidence; what the workers were waiting on says whether
// more workers or faster ones are the fix.
func checkWorkerPool(in *Input) []report.Finding {
	r := in.Run
	if r == nil {
		return nil
	}
	var out []report.Finding
	b := serverBundle(r)
	for _, s := range r.Servers {
		switch {
		case s.Pool != nil:
			if f, ok := fpmPool(r, s, b); ok {
				out = append(out, f)
			}
		case s.Nginx != nil:
			if item, n := logItem(s, app.EventWorkerConns, "“worker_connections are not enough”"); n > 0 {
				wc := s.Nginx.WorkerConnections
				out = append(out, report.Finding{ID: WorkerPoolExhausted, Severity: report.Critical, Status: report.Active,
					Subject: "nginx worker_connections", About: report.About{Server: s.Kind, Setting: "worker_connections"}, Side: r.ServerSide(),
					Title:    fmt.Sprintf("nginx ran out of worker_connections (%d per worker)", wc.Value),
					Evidence: []report.Item{{Text: item, Source: "log", Window: true}},
					Actions:  notes(connsFix(r, s.Nginx), "then reload: nginx -s reload")})
			}
		default:
			if f, ok := familyPool(r, s, b); ok {
				out = append(out, f)
			} else if f, ok := threadPool(r, s, b); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func fpmPool(r *evidence.Run, s *app.Server, b *evidence.Bundle) (report.Finding, bool) {
	p := s.Pool
	smps := r.Samples(s)
	var ev []report.Item
	reached := false
	if item, n := logItem(s, app.EventMaxChildren, "“server reached pm.max_children”"); n > 0 {
		ev = append(ev, report.Item{Text: item, Source: "log", Window: true})
		reached = true
	}
	// Seconds in which every worker was busy, from the status page when
	// there is one, else from the workers' wait channels.
	allBusy, queuePeak, maxReached, statusBusy := 0, 0, 0, 0
	var firstReached, lastReached = -1, -1
	for _, smp := range smps {
		if smp.StatusBusy {
			statusBusy++
		}
		// Busy from the wait channels, where a worker reading its own
		// kept-alive FastCGI connection is idle. php-fpm's status page
		// counts that worker active ("Reading headers"), and its own
		// request occupies one more: its counts only stand in when the
		// workers could not be read.
		busy, total := smp.Workers-smp.Waits[app.WaitIdle], smp.Workers
		if smp.Pool != nil {
			if total == 0 {
				busy, total = smp.Pool.Active-1, smp.Pool.Total
			}
			queuePeak = max(queuePeak, smp.Pool.ListenQueue)
			if firstReached < 0 {
				firstReached = smp.Pool.MaxChildrenReached
			}
			lastReached = smp.Pool.MaxChildrenReached
		}
		if total > 0 && busy >= total && total >= p.MaxChildren.Value {
			allBusy++
		}
	}
	if firstReached >= 0 {
		maxReached = lastReached - firstReached
	}
	q, backlog := peakRecvQ(b, s.Addr, r)
	queued := queuePeak > 0 || q > 0
	if !reached && !(allBusy >= 2 && queued) {
		return report.Finding{}, false
	}
	if allBusy > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("all %d workers busy in %d of %d sampled seconds (pm.max_children = %s)", p.MaxChildren.Value, allBusy, len(smps), p.MaxChildren), Source: "workers", Window: true})
	}
	if statusBusy > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("the status page (served by a free worker) did not answer within 0.8 s in %d of %d seconds", statusBusy, len(smps)), Source: "php-fpm status", Window: true})
	}
	if maxReached > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("status page: max children reached +%d", maxReached), Source: "php-fpm status", Window: true})
	}
	if queuePeak > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("status page: listen queue peaked at %d requests waiting for a worker", queuePeak), Source: "php-fpm status", Window: true})
	} else if q > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%d connections waited in the pool's accept queue on %s (backlog %d)", q, s.Addr, backlog), Source: "sockdiag", Window: true})
	}
	sh, total := waitShares(smps)
	if total > 0 {
		ev = append(ev, report.Item{Text: "busy workers were: " + describeWaits(sh, total), Source: "wchan", Window: true})
	}
	statuses := logStatuses(r.Servers)
	for _, code := range slices.Sorted(maps.Keys(statuses)) {
		n := statuses[code]
		// 502 has many causes (a refused or failed connect); 504 and
		// 499 are requests that waited too long. Up to one 499 per
		// connection is the load stopping with requests in flight.
		if code == 499 && r.Load != nil && n <= r.Load.Connections {
			continue
		}
		if code == 499 || code == 504 {
			ev = append(ev, report.Item{Text: fmt.Sprintf("the front server answered %d× %d during the run", n, code), Source: "access log", Window: true})
		}
	}
	for _, fs := range r.Servers {
		if item, n := logItem(fs, app.EventUpstreamTimeout, "“upstream timed out”"); n > 0 && fs != s {
			ev = append(ev, report.Item{Text: item, Source: "log", Window: true})
		}
	}
	if busy, ok := hostBusy(b, r.LoadStart, r.LoadEnd); ok && busy < 0.7 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("server CPU %.0f%% busy: requests waited for a worker, not for CPU", 100*busy), Source: "/proc/stat", Window: true})
	}
	f := report.Finding{ID: WorkerPoolExhausted, Severity: report.Critical, Status: report.Active,
		Subject: "php-fpm pool " + p.Name, About: report.About{Server: s.Kind, Listen: s.Addr, Pool: p.Name}, Side: r.ServerSide(),
		Title:    fmt.Sprintf("php-fpm pool %s is full: all %d workers busy, requests queue", p.Name, p.MaxChildren.Value),
		Evidence: ev,
		Actions:  notes(poolFix(r, s)),
	}
	if len(sh) > 0 && sh[0].class != app.WaitRunning {
		f.Actions = append(f.Actions, report.Advise(fmt.Sprintf("and shorten what each request holds a worker for: busy workers were mostly in %s (see %s's advice for that wait)", sh[0].class, report.JoinIDs(ofEffect(TimeHeld)))))
	}
	f.Actions = append(f.Actions, report.Advise("then reload php-fpm (kill -USR2 on the master) and re-run"))
	return f, true
}

// connsFix sizes nginx's worker_connections for the run's connections,
// as tune plan does.
func connsFix(r *evidence.Run, n *app.NginxInfo) string {
	wc := n.WorkerConnections
	if r.Load == nil || r.Load.Connections == 0 {
		return fmt.Sprintf("raise worker_connections %s to the connections you need per worker (clients plus upstream connections), and worker_rlimit_nofile to at least twice that", wc)
	}
	want, per := sizing.WorkerConnections(r.Load.Connections, n.Workers())
	return fmt.Sprintf("raise worker_connections %s → %d: %d client connections over %d workers, each with an upstream connection, is %d per worker; twice that, rounded up; worker_rlimit_nofile at least %d",
		wc, want, r.Load.Connections, n.Workers(), per, 2*want)
}

// poolFix sizes pm.max_children as tune plan does: the requests in
// flight (the run's connections, within what the nginx in front can
// hold) and spare, while their memory fits.
func poolFix(r *evidence.Run, s *app.Server) string {
	p := s.Pool
	inflight := 0
	if r.Load != nil {
		inflight = r.Load.Connections
		if front := frontOf(r, s); front != nil && inflight > 0 {
			inflight = min(inflight, front.Nginx.Holds())
		}
	}
	want, spare := sizing.Pool(inflight, p.MaxChildren.Value)
	text := fmt.Sprintf("raise pm.max_children = %d → %d in %s", p.MaxChildren.Value, want, where(p.MaxChildren.Source, "the pool's configuration"))
	if inflight > 0 {
		text += fmt.Sprintf(": %d requests in flight and %d spare, one for the status page", inflight, spare)
	}
	if p.WorkerRSS > 0 {
		text += fmt.Sprintf(" (workers use ~%d MiB each: %d MiB for %d; keep it within free memory)", p.WorkerRSS>>20, (uint64(want)*p.WorkerRSS)>>20, want)
	}
	return text
}

// frontOf is the nginx that passes requests to s, if one was found.
func frontOf(r *evidence.Run, s *app.Server) *app.Server {
	for _, n := range r.Servers {
		if n.Nginx == nil {
			continue
		}
		for _, u := range n.Nginx.Upstreams {
			if slices.Contains(u.Servers, s.Addr) || (s.Pool != nil && slices.Contains(u.Servers, s.Pool.Listen)) {
				return n
			}
		}
	}
	return nil
}

func where(source, fallback string) string {
	if source == "" || source == "default" {
		return fallback + " (not set there: add it)"
	}
	return source
}

// threadPool finds a full pool in any server, from what its threads and
// sockets show without its configuration: a Python, Java or Ruby pool,
// gunicorn's workers, a Go service bounding its concurrency. The pool is
// the most worker threads seen busy at once; it is full when that many
// were busy, blocked off the CPU, in at least two seconds while requests
// waited unread in their connections (or in the accept queue) and the
// CPU idled: more workers would have served them at once. The latency
// then decomposes: the service time is the busy workers over the
// throughput (Little's law), and a median of many service times is time
// spent waiting for a worker.
func threadPool(r *evidence.Run, s *app.Server, b *evidence.Bundle) (report.Finding, bool) {
	smps := r.Samples(s)
	lr := r.Load
	if len(smps) < 2 || lr == nil || lr.Requests < 20 || b == nil {
		return report.Finding{}, false
	}
	busyOf := func(smp app.Sample) int {
		n := 0
		for c, k := range smp.Waits {
			// A thread on a futex may be an idle worker waiting for
			// work as well as a busy one waiting for a lock, and one
			// in an unknown kernel function anything: neither proves
			// the pool full.
			if c != app.WaitIdle && c != app.WaitLock && c != app.WaitOther {
				n += k
			}
		}
		return n
	}
	// The pool is the most threads busy at once in two seconds or more:
	// one sample that caught another thread passing through (a thread
	// accepting, a runtime's helper on the CPU) is not the pool's size.
	counts := make([]int, len(smps))
	sum := 0
	for i, smp := range smps {
		counts[i] = busyOf(smp)
		sum += counts[i]
	}
	slices.Sort(counts)
	pool, peak1 := counts[len(counts)-2], counts[len(counts)-1]
	full := 0
	for _, n := range counts {
		if n >= pool {
			full++
		}
	}
	queued, peak := queuedRequests(r, b, s.Addr)
	// More workers help when each waits on its own: a sleep, a peer, a
	// lookup, the disk. Workers queued on one lock, or on the CPU, would
	// only queue there in greater numbers (app-slow, cpu-saturated).
	sh, total := waitShares(smps)
	if len(sh) == 0 || !parallel[sh[0].class] || 2*sh[0].n < total {
		return report.Finding{}, false
	}
	secs := r.LoadEnd.Sub(r.LoadStart).Seconds()
	if pool == 0 || full < 2 || queued < 2 || secs <= 0 || pool >= lr.Connections {
		return report.Finding{}, false
	}
	cpuItem, ok := poolOffCPU(r, s, b, float64(sum)/float64(len(smps)))
	if !ok {
		return report.Finding{}, false
	}
	// Little's law on the workers: busy = throughput × service time.
	x := float64(lr.Requests) / secs
	service := time.Duration(float64(sum) / float64(len(smps)) / x * float64(time.Second))
	p50 := lr.Latency.P50
	if service <= 0 || p50 < 3*service {
		return report.Finding{}, false // no queueing to speak of
	}
	ratio := float64(p50) / float64(service)
	most := fmt.Sprintf("%d worker threads busy at most, all %d of them", pool, pool)
	if pool == 1 {
		most = "1 worker thread busy at most, its only one"
	}
	if peak1 > pool {
		most = fmt.Sprintf("%d worker threads busy (%d in one second: a thread passing through)", pool, peak1)
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("%s (pid %d): %s in %d of %d sampled seconds; busy threads were: %s",
			s.Kind, s.PIDs[0], most, full, len(smps), describeWaits(sh, total)), Source: "wchan", Window: true},
		{Text: fmt.Sprintf("up to %d requests waited unread in their connections to %s, in %d sampled seconds", peak, s.Addr, queued), Source: "sockdiag", Window: true},
		{Text: fmt.Sprintf("service time ≈ %v (%.1f busy workers on average / %.0f requests/s); responses took p50 %v = %.0f × the service time: requests waited for a free worker",
			service.Round(time.Millisecond/10), float64(sum)/float64(len(smps)), x, p50.Round(time.Millisecond), ratio), Source: "load", Window: true},
		cpuItem,
	}
	want, spare := sizing.Workers(lr.Connections, pool)
	knobs := "gunicorn --workers/--threads, ThreadPoolExecutor(max_workers=…), Tomcat maxThreads, uWSGI processes, or the limit a Go or Node service puts on concurrent requests"
	first := fmt.Sprintf("raise the pool of %s on %s from %d to %d workers: %d requests in flight and %d spare (%s)", s.Kind, s.Addr, pool, want, lr.Connections, spare, knobs)
	title := fmt.Sprintf("%s on %s serves with a pool of %d workers, all busy: requests wait for a free one", s.Kind, s.Addr, pool)
	if pool == 1 {
		// One thread serving every request in turn: a server with no
		// pool at all (Python's http.server without ThreadingMixIn).
		first = fmt.Sprintf("let %s on %s serve requests at once, %d workers: %d requests in flight and %d spare (Python: ThreadingHTTPServer or socketserver.ThreadingMixIn; %s)", s.Kind, s.Addr, want, lr.Connections, spare, knobs)
		title = fmt.Sprintf("%s on %s serves one request at a time, on its only worker thread: requests wait for it", s.Kind, s.Addr)
	}
	fix := notes(first, fmt.Sprintf("or shorten what each request holds a worker for: busy workers were mostly in %s (%s)", sh[0].class, waitFix[sh[0].class]))
	return report.Finding{ID: WorkerPoolExhausted, Severity: report.Critical, Status: report.Active,
		Subject: s.Kind + " " + s.Addr, About: report.About{Server: s.Kind, Listen: s.Addr}, Side: r.ServerSide(),
		Title:    fmt.Sprintf("%s (p50 %v ≈ %.0f × the %v service time)", title, p50.Round(time.Millisecond), ratio, service.Round(time.Millisecond)),
		Evidence: ev, Actions: fix}, true
}

// poolOffCPU tells whether a pool's busy workers spent their time off
// the CPU, where more workers overlap, and says so. The process's own
// accounting decides (schedstat: on a CPU, waiting for one, the rest
// off it): at least half of the busy workers' time off the CPU, whatever
// else keeps the host busy. A batch job or a neighbour that takes the
// CPUs makes the workers wait for one too, and that share is named; a
// pool stretched mostly by the wait for a CPU is the CPU's finding
// (cpu-saturated, run-queue-contention). Without that accounting the
// host's CPU stands in: under 70 % busy, requests waited for a worker.
func poolOffCPU(r *evidence.Run, s *app.Server, b *evidence.Bundle, busy float64) (report.Item, bool) {
	host, hostOK := hostBusy(b, r.LoadStart, r.LoadEnd)
	c, ok := loadCPU(r, s)
	held := time.Duration(busy * float64(c.Span))
	if !ok || held <= 0 {
		if !hostOK || host >= 0.7 {
			return report.Item{}, false
		}
		return report.Item{Text: fmt.Sprintf("server CPU %.0f%% busy: requests waited for a worker, not for CPU", 100*host), Source: "/proc/stat", Window: true}, true
	}
	// All the process's threads' CPU and run delay against the busy
	// workers' time: an acceptor's CPU counts against the pool, never
	// for it.
	onCPU, waited := c.OnCPU, c.RunDelay
	if 2*(onCPU+waited) >= held {
		return report.Item{}, false
	}
	share := func(d time.Duration) float64 { return 100 * float64(d) / float64(held) }
	text := fmt.Sprintf("the busy workers' time: %.0f%% off the CPU, %.0f%% waiting for a CPU, %.0f%% on one (the process's schedstat): requests waited for a worker, not for CPU",
		100-share(onCPU)-share(waited), share(waited), share(onCPU))
	if hostOK {
		text += fmt.Sprintf("; host CPU %.0f%% busy", 100*host)
	}
	return report.Item{Text: text, Source: "schedstat", Window: true}, true
}

// parallel are the waits that more workers overlap rather than contend
// on.
var parallel = map[string]bool{app.WaitSleep: true, app.WaitNetwork: true, app.WaitDNS: true, app.WaitDisk: true}

// queuedRequests counts the load-window snapshots in which requests
// waited for a server at addr, unread in their connections or in its
// accept queue, and the most that did at once.
func queuedRequests(r *evidence.Run, b *evidence.Bundle, addr string) (secs, peak int) {
	for _, snap := range b.Snapshots {
		if snap.Time.Before(r.LoadStart) || snap.Time.After(r.LoadEnd) || snap.Sockets == nil {
			continue
		}
		for _, l := range snap.Sockets.Listeners {
			if l.Addr != addr || l.Proto == "unix" {
				continue
			}
			if q := max(l.Unread, int(l.RecvQ)); q > 0 {
				secs++
				peak = max(peak, q)
			}
			break
		}
	}
	return secs, peak
}

// poolBusy is the share of the load's sampled seconds in which every
// thread of a pool must be busy for it to be full.
const poolBusy = 0.5

// familyPool finds a full pool among a server's named threads, in any
// runtime that names them (a JVM executor's pool-1-thread-N, Tomcat's
// http-nio-8080-exec-N, a native program's): threads sharing a name but
// for a number take turns at the same work. A thread is busy when it
// runs or waits in anything but the wait it idled in outside the load
// (its own condition variable, its queue's), so a worker parked on a
// timed futex (Thread.sleep, a timed park for a connection) counts
// while an idle one on its queue does not, though both are futexes. The
// runtime's own threads (GC, JIT, timers, the HTTP dispatcher) are not
// sampled. The pool is full when all its threads were busy in half the
// load's sampled seconds or more while more requests were in flight
// than it has threads (Little's law from the load: in flight = rate ×
// mean latency): the rest waited for a worker, in the kernel or in the
// runtime's own queue (an executor's, where the kernel shows nothing).
// The workers' own waits say more workers would help (each waits on its
// own, off the CPU), whatever else keeps the host's CPU busy.
func familyPool(r *evidence.Run, s *app.Server, b *evidence.Bundle) (report.Finding, bool) {
	p, ok := fullFamily(r, s)
	if !ok {
		return report.Finding{}, false
	}
	lr := r.Load
	total := 0
	for _, w := range p.waits {
		total += w.n
	}
	var what []string
	for _, w := range p.waits[:min(3, len(p.waits))] {
		what = append(what, fmt.Sprintf("%s %.0f%%", w.key, 100*float64(w.n)/float64(total)))
	}
	threads := fmt.Sprintf("threads %s* (%d)", p.family, p.size)
	queued, peak := queuedRequests(r, b, s.Addr)
	where := "inside the process (no request waited unread in the kernel: the runtime's own queue holds them)"
	if queued > 0 {
		where = fmt.Sprintf("up to %d of them unread in their connections to %s, in %d sampled seconds", peak, s.Addr, queued)
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("%s (pid %d): %s, all busy in %d of %d sampled seconds, %.1f busy on average; each waited on: %s", s.Kind, s.PIDs[0], threads, p.full, p.samples, p.busy, strings.Join(what, ", ")), Source: "threads (comm, syscall)", Window: true},
		{Text: fmt.Sprintf("in flight: %.0f requests/s × %v mean latency ≈ %.0f requests at once (Little's law) for %d workers: ~%.0f waited for one, %s", p.rate, lr.Latency.Mean.Round(time.Millisecond/10), p.inFlight, p.size, p.inFlight-p.busy, where), Source: "load", Window: true},
		{Text: fmt.Sprintf("service time ≈ %v (%.1f busy workers / %.0f requests/s); mean latency %v: ~%v of it waiting for a worker", p.service.Round(time.Millisecond/10), p.busy, p.rate, lr.Latency.Mean.Round(time.Millisecond/10), p.wait.Round(time.Millisecond/10)), Source: "load", Window: true},
	}
	if cpu, ok := hostBusy(b, r.LoadStart, r.LoadEnd); ok {
		// The workers waited off the CPU whatever the host's CPU did
		// (other processes may keep it busy): more of them overlap.
		ev = append(ev, report.Item{Text: fmt.Sprintf("host CPU %.0f%% busy over the load; the workers waited off it", 100*cpu), Source: "/proc/stat", Window: true})
	}
	want, spare := sizing.Workers(int(math.Ceil(p.inFlight)), p.size)
	fix := notes(fmt.Sprintf("raise the pool of %s on %s from %d to %d threads: %.0f requests in flight and %d spare — %s", s.Kind, s.Addr, p.size, want, p.inFlight, spare, poolKnob(p.family, s)),
		fmt.Sprintf("or shorten what each request holds a worker for: its workers were mostly in %s", p.waits[0].key))
	return report.Finding{ID: WorkerPoolExhausted, Severity: report.Critical, Status: report.Active,
		Subject: s.Kind + " " + s.Addr, About: report.About{Server: s.Kind, Listen: s.Addr}, Side: r.ServerSide(),
		Title: fmt.Sprintf("%s on %s serves with a pool of %d threads (%s*), all busy: requests wait for a free one (mean %v, %v of it waiting; service %v)",
			s.Kind, s.Addr, p.size, p.family, lr.Latency.Mean.Round(time.Millisecond), p.wait.Round(time.Millisecond), p.service.Round(time.Millisecond)),
		Evidence: ev, Actions: fix}, true
}

// threadPoolStats is a full pool of a server's named threads (fullFamily).
type threadPoolStats struct {
	family        string
	size          int
	full, samples int
	// busy is the mean busy threads over the load's samples; waits what
	// they waited on, most first.
	busy  float64
	waits []keyCount
	// rate and inFlight are the load's: requests per second, and at once
	// (rate × mean latency); service the time a request held a worker
	// (busy / rate), wait the rest of the mean latency.
	rate, inFlight float64
	service, wait  time.Duration
}

// fullFamily finds a server's full pool of named threads (familyPool).
func fullFamily(r *evidence.Run, s *app.Server) (threadPoolStats, bool) {
	var p threadPoolStats
	lr := r.Load
	load := r.Samples(s)
	secs := r.LoadEnd.Sub(r.LoadStart).Seconds()
	if lr == nil || lr.Requests < 20 || len(load) < 2 || secs <= 0 || lr.Latency.Mean <= 0 {
		return p, false
	}
	idle := map[int][]string{}
	for _, smp := range s.Samples {
		if !smp.Time.Before(r.LoadStart) && !smp.Time.After(r.LoadEnd) {
			continue
		}
		for _, th := range smp.Threads {
			if th.Wait != "" && !slices.Contains(idle[th.TID], th.Wait) {
				idle[th.TID] = append(idle[th.TID], th.Wait)
			}
		}
	}
	busy := func(th app.Thread) bool {
		switch {
		case th.Class == app.WaitRunning:
			return true
		case th.Class == app.WaitIdle:
			return false
		}
		if ws, ok := idle[th.TID]; ok {
			return !slices.ContainsFunc(ws, func(w string) bool { return app.SameWait(th.Wait, w) })
		}
		// A thread not seen idle: only a wait that holds a request.
		return parallel[th.Class] || th.Class == app.WaitFile
	}
	type family struct {
		size, full, busy int
		waits            map[string]int
	}
	fams := map[string]*family{}
	get := func(f string) *family {
		fm := fams[f]
		if fm == nil {
			fm = &family{waits: map[string]int{}}
			fams[f] = fm
		}
		return fm
	}
	for _, smp := range load {
		n, bz := map[string]int{}, map[string]int{}
		for _, th := range smp.Threads {
			f := app.Family(th.Name)
			n[f]++
			if busy(th) {
				bz[f]++
				get(f).waits[threadWait(th)]++
			}
		}
		for f, k := range n {
			fm := get(f)
			fm.size = max(fm.size, k)
			fm.busy += bz[f]
			if k >= 2 && bz[f] == k {
				fm.full++
			}
		}
	}
	var pool *family
	for f, fm := range fams {
		if fm.size >= 2 && (pool == nil || fm.busy > pool.busy || fm.busy == pool.busy && f < p.family) {
			p.family, pool = f, fm
		}
	}
	if pool == nil || pool.full < 2 || float64(pool.full) < poolBusy*float64(len(load)) {
		return p, false
	}
	// Workers all busy on the CPU, or on one lock, would only queue
	// there in greater numbers (cpu-saturated, app-slow): more workers
	// help those that each wait on their own.
	p.waits = sortedCounts(pool.waits)
	if len(p.waits) == 0 || !poolWaitParallel(p.waits[0].key) {
		return p, false
	}
	p.size, p.full, p.samples = pool.size, pool.full, len(load)
	p.rate = float64(lr.Requests) / secs
	p.inFlight = p.rate * lr.Latency.Mean.Seconds()
	if p.inFlight <= float64(p.size) {
		return p, false
	}
	p.busy = float64(pool.busy) / float64(len(load))
	p.service = time.Duration(p.busy / p.rate * float64(time.Second))
	p.wait = max(0, lr.Latency.Mean-p.service)
	return p, true
}

// threadWait says in a few words what a busy thread waited on.
func threadWait(th app.Thread) string {
	switch {
	case th.Class == app.WaitRunning:
		return "the CPU"
	case th.Peer != "":
		return "reading from " + th.Peer
	case strings.HasPrefix(th.Wait, "futex ") && strings.HasSuffix(th.Wait, " timed"):
		return "a timed wait (futex with a timeout: a sleep, a timed park)"
	case strings.HasPrefix(th.Wait, "futex "):
		return "a lock or condition (futex)"
	case th.Class == app.WaitOther && th.Wait != "":
		return th.Wait
	}
	return th.Class
}

// poolWaitParallel says whether workers waiting on w each wait on their
// own: more of them would overlap.
func poolWaitParallel(w string) bool {
	return strings.HasPrefix(w, "reading from ") || strings.HasPrefix(w, "a timed wait") || parallel[w]
}

// poolKnob names where a pool of threads named family* is sized, by the
// runtime and the names its libraries give their threads.
func poolKnob(family string, s *app.Server) string {
	switch {
	case strings.HasPrefix(family, "pool-") && strings.HasSuffix(family, "-thread-"):
		return "the JDK's executor (threads named by its default thread factory): Executors.newFixedThreadPool(n), or ThreadPoolExecutor's corePoolSize and maximumPoolSize"
	case strings.Contains(family, "-exec-"):
		return "Tomcat's connector threads: maxThreads on the Connector (server.xml), server.tomcat.threads.max in Spring Boot"
	case strings.HasPrefix(family, "qtp"):
		return "Jetty's QueuedThreadPool: maxThreads"
	case strings.HasPrefix(family, "XNIO-") && strings.Contains(family, "task-"):
		return "Undertow's worker threads: io-threads/worker-threads (server.undertow.threads.worker in Spring Boot)"
	case strings.HasPrefix(family, "ForkJoinPool"):
		return "the ForkJoinPool's parallelism (java.util.concurrent.ForkJoinPool.common.parallelism for the common pool)"
	case strings.HasPrefix(family, "grpc-default-executor"):
		return "gRPC's executor: ServerBuilder.executor(a bounded pool of the size you need)"
	}
	return fmt.Sprintf("the pool that names its threads %s* in %s", family, s.Kind)
}

type keyCount struct {
	key string
	n   int
}

// sortedCounts are m's entries, most first.
func sortedCounts(m map[string]int) []keyCount {
	var out []keyCount
	for k, n := range m {
		out = append(out, keyCount{k, n})
	}
	slices.SortFunc(out, func(a, b keyCount) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.key, b.key)
	})
	return out
}
