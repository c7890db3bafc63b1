package rules

import (
	"fmt"
	"maps"
	"slices"
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
	Consequences: []Consequence{{ID: AcceptQueueOverflow, At: OwnListener}}, Blocks: true, AtCapacity: true,
	Meaning:    "the application's worker pool (php-fpm `pm.max_children`, nginx `worker_connections`, or any server's threads) is full; requests queue or time out",
	Active:     "php-fpm logged \"reached pm.max_children\", or every worker was busy for ≥ 2 s while requests queued on the pool's socket; nginx logged \"worker_connections are not enough\"; any server: its most busy threads all busy off-CPU for ≥ 2 s while requests waited unread, p50 ≥ 3 service times (critical)",
	LatentWhen: "—",
	Seed:       "000 stage 2, and any thread pool",
	ReportedBy: "`run`",
})

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
	b := r.serverBundle()
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
			if f, ok := threadPool(r, s, b); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func fpmPool(r *Run, s *app.Server, b *evidence.Bundle) (report.Finding, bool) {
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
		f.Actions = append(f.Actions, report.Advise(fmt.Sprintf("and shorten what each request holds a worker for: busy workers were mostly in %s (see %s's advice for that wait)", sh[0].class, AppSlow)))
	}
	f.Actions = append(f.Actions, report.Advise("then reload php-fpm (kill -USR2 on the master) and re-run"))
	return f, true
}

// connsFix sizes nginx's worker_connections for the run's connections,
// as tune plan does.
func connsFix(r *Run, n *app.NginxInfo) string {
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
func poolFix(r *Run, s *app.Server) string {
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
func frontOf(r *Run, s *app.Server) *app.Server {
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
func threadPool(r *Run, s *app.Server, b *evidence.Bundle) (report.Finding, bool) {
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
	cpu, cpuOK := hostBusy(b, r.LoadStart, r.LoadEnd)
	secs := r.LoadEnd.Sub(r.LoadStart).Seconds()
	if pool == 0 || full < 2 || queued < 2 || !cpuOK || cpu >= 0.7 || secs <= 0 || pool >= lr.Connections {
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
	if peak1 > pool {
		most = fmt.Sprintf("%d worker threads busy (%d in one second: a thread passing through)", pool, peak1)
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("%s (pid %d): %s in %d of %d sampled seconds; busy threads were: %s",
			s.Kind, s.PIDs[0], most, full, len(smps), describeWaits(sh, total)), Source: "wchan", Window: true},
		{Text: fmt.Sprintf("up to %d requests waited unread in their connections to %s, in %d sampled seconds", peak, s.Addr, queued), Source: "sockdiag", Window: true},
		{Text: fmt.Sprintf("service time ≈ %v (%.1f busy workers on average / %.0f requests/s); responses took p50 %v = %.0f × the service time: requests waited for a free worker",
			service.Round(time.Millisecond/10), float64(sum)/float64(len(smps)), x, p50.Round(time.Millisecond), ratio), Source: "load", Window: true},
		{Text: fmt.Sprintf("server CPU %.0f%% busy: requests waited for a worker, not for CPU", 100*cpu), Source: "/proc/stat", Window: true},
	}
	want, spare := sizing.Workers(lr.Connections, pool)
	fix := notes(fmt.Sprintf("raise the pool of %s on %s from %d to %d workers: %d requests in flight and %d spare (gunicorn --workers/--threads, ThreadPoolExecutor(max_workers=…), Tomcat maxThreads, uWSGI processes, or the limit a Go or Node service puts on concurrent requests)",
		s.Kind, s.Addr, pool, want, lr.Connections, spare),
		fmt.Sprintf("or shorten what each request holds a worker for: busy workers were mostly in %s (%s)", sh[0].class, waitFix[sh[0].class]))
	return report.Finding{ID: WorkerPoolExhausted, Severity: report.Critical, Status: report.Active,
		Subject: s.Kind + " " + s.Addr, About: report.About{Server: s.Kind, Listen: s.Addr}, Side: r.ServerSide(),
		Title: fmt.Sprintf("%s on %s serves with a pool of %d workers, all busy: requests wait for a free one (p50 %v ≈ %.0f × the %v service time)",
			s.Kind, s.Addr, pool, p50.Round(time.Millisecond), ratio, service.Round(time.Millisecond)),
		Evidence: ev, Actions: fix}, true
}

// parallel are the waits that more workers overlap rather than contend
// on.
var parallel = map[string]bool{app.WaitSleep: true, app.WaitNetwork: true, app.WaitDNS: true, app.WaitDisk: true}

// queuedRequests counts the load-window snapshots in which requests
// waited for a server at addr, unread in their connections or in its
// accept queue, and the most that did at once.
func queuedRequests(r *Run, b *evidence.Bundle, addr string) (secs, peak int) {
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
