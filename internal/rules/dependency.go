package rules

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// DependencyPoolSaturated: a server's few connections to a dependency (a
// database, a cache, a backend) are busy all the time, and requests
// queue for one.
const DependencyPoolSaturated report.FindingID = "dependency-pool-saturated"

var _ = define(Class{ID: DependencyPoolSaturated,
	Is: LegWait, Resource: "dependency-pool",
	Critical: true,
	Delays:   true, Holds: true,
	Blocks: true, Waits: true, AtCapacity: true,
	Meaning:    "a server's few connections to a dependency (database, cache, backend) are busy all the time; requests queue for a connection",
	Active:     "in a run, a server's connections to one destination had a request outstanding ≥ 80 % of the time while the load's p50 was ≥ 3 × the dependency's time per request and ≥ 30 ms; without a load (`check`, the agent), ≥ 85 % over ≥ 50 round trips (critical)",
	LatentWhen: "—",
	Seed:       "any small client pool (the issue's API with 4 connections)",
	ReportedBy: "`run`, `check`, agent",
})

// DependencySlow: most of a request's time is a dependency's answer.
const DependencySlow report.FindingID = "dependency-slow"

var _ = define(Class{ID: DependencySlow,
	Is:     LegWait,
	Delays: true, Holds: true,
	Blocks: true, Waits: true,
	Meaning:    "most of a request's time is spent waiting for a dependency's answers",
	Active:     "in a run, the dependency's time per request (round trips per request × time per round trip) ≥ half the p50, p50 ≥ 30 ms; without a load, ≥ 100 ms per round trip on a pool ≥ 25 % busy; or a busy pipelined/multiplexed connection whose time cannot be measured (warning)",
	LatentWhen: "—",
	Seed:       "a slow backend behind a roomy pool",
	ReportedBy: "`run`, `check`, agent",
})

var _ = register(Rule{Name: "dependency", Order: 200, Scope: PerRun, IDs: []report.FindingID{DependencyPoolSaturated, DependencySlow}, Checks: "dependencies (databases, caches, backends)", Check: checkDependency, Traced: true, LooksIn: traced})

// Thresholds of the dependency rule.
const (
	// depBusy is the pool's busy share from which it is full: requests
	// find every connection taken.
	depBusy = 0.8
	// depQueue is how many times the dependency's own time per request
	// the p50 must be for requests to be queueing for a connection.
	depQueue = 3.0
	// depShare is the share of the p50 a dependency must take to be
	// called the slow part.
	depShare = 0.5
)

// checkDependency reads each server's connections to what it depends on
// (app.Dependency, traced every 100 ms while the load ran) and says when
// the time is the dependency's: the pool is full and requests queue for
// a connection, or the dependency's answers are most of the p50.
func checkDependency(in *Input) []report.Finding {
	if in.Run == nil {
		return checkTraced(in.Traced, in.Bundle)
	}
	r := in.Run
	if r == nil || r.Load == nil || r.Load.Requests < 20 || r.Load.Latency.P50 < appSlowLatency {
		return nil
	}
	lr := r.Load
	secs := lr.DurationS
	if secs <= 0 {
		secs = r.LoadEnd.Sub(r.LoadStart).Seconds()
	}
	if secs <= 0 {
		return nil
	}
	rate := float64(lr.Requests) / secs
	cpu, cpuOK := hostBusy(r.serverBundle(), r.LoadStart, r.LoadEnd)
	var out []report.Finding
	for _, s := range r.Servers {
		for i := range s.Deps {
			if f, ok := depFinding(r, s, &s.Deps[i], rate, cpu, cpuOK); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func depFinding(r *Run, s *app.Server, d *app.Dependency, rate, cpu float64, cpuOK bool) (report.Finding, bool) {
	lr := r.Load
	p50 := lr.Latency.P50
	// An untimed dependency (a unix socket) has no time to compare with
	// the p50: its owner, observed as a server of the run, speaks for it.
	if d.Untimed != "" || d.Conns == 0 || d.RoundTripsPerSec <= 0 || d.Seconds < 1 || rate <= 0 {
		return report.Finding{}, false
	}
	who := depName(d)
	subject := s.Kind + " " + s.Addr + " → " + d.Addr
	about := report.About{Server: s.Kind, Listen: s.Addr, Remotes: []string{d.Addr}}
	table := report.Item{Text: depRow(d), Source: "sock_diag tcp_info", Window: true}
	if d.Multiplexed() {
		if d.Busy < depShare || !cpuOK || cpu >= 0.7 {
			return report.Finding{}, false
		}
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
			Title: fmt.Sprintf("%s %s waits on %s over %d connections with several requests outstanding on each: the time per request cannot be measured from its connections", s.Kind, s.Addr, who, d.Conns),
			Evidence: []report.Item{table,
				{Text: fmt.Sprintf("in %.0f%% of the busy samples another request went out before the previous answer came (pipelined or multiplexed): round trips and pool size are not estimated", 100*d.Pipelined), Source: "sock_diag tcp_info", Window: true},
				latencyItem(lr)},
			Actions: notes("measure the dependency's own latency (its slow log, its metrics, a client-side histogram): on a multiplexed connection only the client knows which answer belongs to which request")}, true
	}
	perReq := d.RoundTripsPerSec / rate
	depTime := time.Duration(perReq * float64(d.RoundTrip))
	if depTime <= 0 {
		return report.Finding{}, false
	}
	q := float64(p50) / float64(depTime)
	maxRate := d.MaxRoundTripsPerSec() / perReq
	decomp := report.Item{Text: fmt.Sprintf("latency: p50 %s ≈ %s in %s (%.1f round trips per request × %s) + %s waiting for a connection and the server's own work",
		ms(p50), ms(depTime), d.Addr, perReq, ms(d.RoundTrip), ms(max(0, p50-depTime))), Source: "sock_diag tcp_info", Window: true}
	ev := []report.Item{table, latencyItem(lr), decomp}
	if cpuOK {
		ev = append(ev, report.Item{Text: fmt.Sprintf("server CPU %.0f%% busy over the load", 100*cpu), Source: "/proc/stat", Window: true})
	}
	if dep := depServer(r, d); dep != nil {
		if sh, total := waitShares(r.Samples(dep)); total > 0 {
			ev = append(ev, report.Item{Text: fmt.Sprintf("%s, observed as a server of this run, its threads sampled each second while busy: %s", who, describeWaits(sh, total)), Source: "wchan", Window: true})
		}
	}
	switch {
	case d.Busy >= depBusy && q >= depQueue:
		return report.Finding{ID: DependencyPoolSaturated, Severity: report.Critical, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
			Title: fmt.Sprintf("%s %s waits on %s: %d connections, each busy ~%.0f %%, ~%s per round trip → at most ~%.0f req/s; the p50 is %.0f × that: requests queue for a connection",
				s.Kind, s.Addr, who, d.Conns, 100*d.Busy, ms(d.RoundTrip), maxRate, q),
			Evidence: append(ev, inFlightItem(lr, rate, d.Conns)), Actions: depPoolFix(r, s, d, who, cpu, cpuOK, rate, depTime)}, true
	case float64(depTime) >= depShare*float64(p50):
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
			Title: fmt.Sprintf("%s %s waits on %s: ~%s per round trip, %.1f per request, %.0f%% of the p50 %s",
				s.Kind, s.Addr, who, ms(d.RoundTrip), perReq, 100*float64(depTime)/float64(p50), ms(p50)),
			Evidence: ev, Actions: notes(
				fmt.Sprintf("the time is %s's: diagnose it (its own findings in this report when netdoctor observes it, else its slow log and metrics)", who),
				"or ask it less: cache its answers, batch or pipeline the round trips a request makes")}, true
	}
	return report.Finding{}, false
}

// biggerPool begins the advice to grow a client's pool, poolKnobs says
// where pools are sized; relate replaces that advice (notBigger), which
// biggerPoolFix tags, when the dependency is itself at capacity.
const (
	biggerPool = "a bigger pool"
	poolKnobs  = "where the client library sets it (Go database/sql SetMaxOpenConns, go-redis PoolSize, HikariCP maximumPoolSize, SQLAlchemy pool_size, a hand-made pool's size)"
)

// connKnobs are where a runtime's client libraries size their pools of
// connections, by runtime (runtimeOf).
var connKnobs = map[string]string{
	"node":   "where the client sets it (Node's http.Agent maxSockets — the default agent has no limit, so one was set —, undici's Pool connections, pg's Pool max, mysql2's connectionLimit)",
	"go":     "where the client sets it (Go's http.Transport MaxConnsPerHost, database/sql SetMaxOpenConns, go-redis PoolSize)",
	"java":   "where the client sets it (HikariCP maximumPoolSize, Apache HttpClient setMaxConnPerRoute and setMaxConnTotal, OkHttp's Dispatcher maxRequestsPerHost)",
	"python": "where the client sets it (SQLAlchemy pool_size and max_overflow, requests' HTTPAdapter pool_maxsize with pool_block, aiohttp's TCPConnector limit_per_host, psycopg_pool max_size)",
}

// runtimeOf names the runtime a server runs on: what the observer
// told (app.Runtime), else its process name: "java", "node", "python",
// or "" when that does not tell (a Go program is named after itself).
func runtimeOf(s *app.Server) string {
	if rt := s.Runtime; rt != nil {
		switch rt.Name {
		case app.RuntimeGunicorn, app.RuntimeUvicorn:
			return string(app.RuntimePython)
		case "":
		default:
			return string(rt.Name)
		}
	}
	switch k := s.Kind; {
	case k == "java":
		return "java"
	case k == "node" || k == "nodejs":
		return "node"
	case strings.HasPrefix(k, "python"):
		return "python"
	}
	return ""
}

// knobsOf is where a server's runtime sizes its connection pools.
func knobsOf(s *app.Server) string {
	if k, ok := connKnobs[runtimeOf(s)]; ok {
		return k
	}
	return poolKnobs
}

// depPoolFix says which side to change: a bigger pool only when the
// dependency has room for more requests at once.
func depPoolFix(r *Run, s *app.Server, d *app.Dependency, who string, cpu float64, cpuOK bool, rate float64, depTime time.Duration) []report.Action {
	want := int(math.Ceil(float64(r.Load.Connections) * float64(depTime) / float64(r.Load.Latency.P50) * depQueue))
	want = max(want, 2*d.Conns)
	if c := r.Load.Connections; c > 0 {
		want = min(want, c)
	}
	spare := cpuOK && cpu < 0.7
	why := "its CPU or workers are busy"
	if dep := depServer(r, d); dep != nil {
		if sh, total := waitShares(r.Samples(dep)); total > 0 && len(sh) > 0 && sh[0].class == app.WaitRunning && 2*sh[0].n >= total {
			spare, why = false, "its threads were mostly on the CPU"
		}
		// Requests waiting unread at the dependency: its workers are all
		// taken, and more connections would only queue there.
		if secs, peak := queuedRequests(r, r.serverBundle(), dep.Addr); secs >= 2 {
			spare, why = false, fmt.Sprintf("up to %d requests waited unread in its connections, in %d sampled seconds", peak, secs)
		}
	}
	first := report.Advise(fmt.Sprintf("not a bigger pool: %s has no spare capacity (%s); make it faster or give it more workers first (its own findings, its slow log)", who, why))
	if spare {
		first = biggerPoolFix(fmt.Sprintf(biggerPool+": from %d to about %d connections, "+knobsOf(s)+"; %s has room for more requests at once (the CPU was %.0f%% busy and its threads mostly waited)", d.Conns, want, who, 100*cpu))
	}
	return []report.Action{first, report.Advise("or ask it less: cache its answers, batch or pipeline the round trips each request makes")}
}

// biggerPoolFix is the advice to grow a client's pool, tagged so that
// relate finds it.
func biggerPoolFix(text string) report.Action {
	a := report.Advise(text)
	a.Tag = report.TagBiggerPool
	return a
}

// inFlightItem is Little's law on the load: requests in flight at once,
// against the pool's connections.
func inFlightItem(lr *load.Result, rate float64, conns int) report.Item {
	in := rate * lr.Latency.Mean.Seconds()
	return report.Item{Text: fmt.Sprintf("in flight: %.0f requests/s × %s mean latency ≈ %.0f requests at once (Little's law) for %d connections: the others waited for one, inside the process where the kernel shows no queue", rate, ms(lr.Latency.Mean), in, conns), Source: "load", Window: true}
}

// depServer is the run's server listening at the dependency's address.
func depServer(r *Run, d *app.Dependency) *app.Server {
	for _, s := range r.Servers {
		if s.Addr == d.Addr || (s.Role == "dependency" && sameAddr(s.Addr, d.Addr)) {
			return s
		}
	}
	return nil
}

// depName is the dependency's address and, when known, its owner.
func depName(d *app.Dependency) string {
	if d.OtherHost {
		return d.Addr + " (on another host: no namespace of this one listens there)"
	}
	if d.Owner == "" {
		return d.Addr
	}
	return d.Addr + " (" + d.Owner + ")"
}

// depRow is one line of the dependency table.
func depRow(d *app.Dependency) string {
	return fmt.Sprintf("%s: %d connections (%d new), each busy %.0f%%, %.0f round trips/s, %s per round trip (%s), %.0f/%.0f segments/s and %s/%s per second out/in",
		depName(d), d.Conns, d.New, 100*d.Busy, d.RoundTripsPerSec, ms(d.RoundTrip), rttText(d), d.SegsOutPerSec, d.SegsInPerSec, report.Bytes(d.BytesOutPerSec), report.Bytes(d.BytesInPerSec))
}

// rttText is the network's share of a round trip: the lowest RTT the
// kernel sampled. The smoothed RTT is no measure of the network where
// ACKs ride on answers (it was 20.5 ms to a backend 170 µs away that
// answers in 20 ms), so it is named for what it is when it is all there
// is.
func rttText(d *app.Dependency) string {
	if d.MinRTT > 0 {
		return "network RTT " + d.MinRTT.Round(time.Microsecond).String()
	}
	return "smoothed RTT " + d.RTT.Round(time.Microsecond).String() + ", answers' time included"
}

func latencyItem(lr *load.Result) report.Item {
	return report.Item{Text: fmt.Sprintf("responses took p50 %s, p99 %s over %d requests at %d connections", ms(lr.Latency.P50), ms(lr.Latency.P99), lr.Requests, lr.Connections), Source: "load", Window: true}
}

func ms(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }

// Thresholds of the dependency rule without a load (check, the agent):
// no client-side latency to compare with, so only the sockets speak.
const (
	// tracedBusy is the pool's busy share from which it is saturated:
	// a request finds every connection taken most of the time, so
	// requests wait for one.
	tracedBusy = 0.85
	// tracedSlow is the time per round trip from which a dependency is
	// slow in itself, whatever the requests that wait for it.
	tracedSlow = 100 * time.Millisecond
	// tracedSlowBusy is the busy share a slow dependency must also have:
	// an occasional slow call on an idle pool is not what the host's
	// requests wait on.
	tracedSlowBusy = 0.25
	// tracedRoundTrips and tracedSamples are the least evidence for a
	// finding: never a handful of requests or of looks.
	tracedRoundTrips = 50
	tracedSamples    = 10
	// tracedMinRoundTrip is the time per round trip below which a busy
	// pool is not judged without a load. A backend that answers at once
	// keeps its pool as busy as the client can send: the round trip is
	// the network's RTT and the client's own turnaround (its CPU, its
	// scheduler), measured 146 µs at 97 % busy under 32 clients on this
	// host, and a request waiting for a connection waits well under a
	// millisecond per request ahead of it. run measures what it costs.
	tracedMinRoundTrip = time.Millisecond
)

// checkTraced reads the dependencies check and the agent traced under
// the host's own traffic (report.Traced) and says which of them hold the
// servers' requests: a pool whose connections are busy nearly all the
// time (requests wait for one: the pool caps the rate at connections /
// time per round trip), or a dependency whose round trips are long. b is
// the window's snapshots, for the host's CPU. Rule `dependency`'s
// findings, made without a load.
func checkTraced(t *report.Traced, b *evidence.Bundle) []report.Finding {
	if t == nil {
		return nil
	}
	var out []report.Finding
	for _, s := range t.Servers {
		for i := range s.Deps {
			if f, ok := tracedFinding(t, b, s, &s.Deps[i]); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

func tracedFinding(t *report.Traced, b *evidence.Bundle, s *app.Server, d *app.Dependency) (report.Finding, bool) {
	if !tracedEnough(d) {
		return report.Finding{}, false
	}
	who := depName(d)
	subject := s.Kind + " " + s.Addr + " → " + d.Addr
	about := report.About{Server: s.Kind, Listen: s.Addr, Remotes: []string{d.Addr}}
	table := report.Item{Text: depRow(d), Source: "sock_diag tcp_info", Window: true}
	traced := report.Item{Text: fmt.Sprintf("its %d connections looked at every %d ms for %.1fs under the host's own traffic (no load): %.0f round trips", d.Conns, t.IntervalMS, d.Seconds, d.RoundTripsPerSec*d.Seconds), Source: "sock_diag tcp_info", Window: true}
	ev := []report.Item{table, traced}
	end := t.Start.Add(time.Duration(t.Seconds * float64(time.Second)))
	cpu, cpuOK := hostBusy(b, t.Start, end)
	if cpuOK {
		ev = append(ev, report.Item{Text: fmt.Sprintf("host CPU %.0f%% busy over the window", 100*cpu), Source: "/proc/stat", Window: true})
	}
	if d.Multiplexed() {
		if d.Busy < tracedBusy {
			return report.Finding{}, false
		}
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about,
			Title:    fmt.Sprintf("%s %s waits on %s over %d connections, busy %.0f %% with several requests outstanding on each: the time per request and the pool's capacity cannot be measured from its connections", s.Kind, s.Addr, who, d.Conns, 100*d.Busy),
			Evidence: append(ev, report.Item{Text: fmt.Sprintf("in %.0f%% of the busy samples another request went out before the previous answer came (pipelined or multiplexed): round trips and pool size are not estimated", 100*d.Pipelined), Source: "sock_diag tcp_info", Window: true}),
			Actions:  notes("measure the dependency's own latency (its slow log, its metrics, a client-side histogram): on a multiplexed connection only the client knows which answer belongs to which request")}, true
	}
	switch {
	case d.Busy >= tracedBusy && d.RoundTrip >= tracedMinRoundTrip:
		maxRate := d.MaxRoundTripsPerSec()
		first := biggerPoolFix(fmt.Sprintf(biggerPool+", about twice the %d connections, "+poolKnobs+", when %s has room for more requests at once (its CPU and its workers not busy); otherwise make it faster first (its own findings, its slow log)", d.Conns, who))
		if cpuOK && cpu >= 0.7 {
			// Still advice on the pool's size: a dependency known to be
			// at capacity replaces it too (notBigger).
			first = biggerPoolFix(fmt.Sprintf("not a bigger pool yet: the host's CPU is %.0f%% busy, %s may have no spare capacity; make it faster first (its own findings, its slow log)", 100*cpu, who))
		}
		fix := append([]report.Action{first}, notes("or ask it less: cache its answers, batch or pipeline the round trips each request makes",
			"to measure what the waiting costs the server's requests: netdoctor run against the server")...)
		return report.Finding{ID: DependencyPoolSaturated, Severity: report.Critical, Status: report.Active, Subject: subject, About: about,
			Title: fmt.Sprintf("%s %s waits on %s: %d connections, each busy ~%.0f %%, ~%s per round trip → at most ~%.0f req/s through this pool; requests wait for a connection",
				s.Kind, s.Addr, who, d.Conns, 100*d.Busy, ms(d.RoundTrip), maxRate),
			Evidence: ev, Actions: fix}, true
	case d.RoundTrip >= tracedSlow && d.Busy >= tracedSlowBusy:
		return report.Finding{ID: DependencySlow, Severity: report.Warning, Status: report.Active, Subject: subject, About: about,
			Title: fmt.Sprintf("%s %s waits on %s: ~%s per round trip, %.0f round trips/s, its %d connections busy ~%.0f %%",
				s.Kind, s.Addr, who, ms(d.RoundTrip), d.RoundTripsPerSec, d.Conns, 100*d.Busy),
			Evidence: ev, Actions: notes(
				fmt.Sprintf("the time is %s's: diagnose it (netdoctor check where it runs, its slow log and metrics)", who),
				"or ask it less: cache its answers, batch or pipeline the round trips a request makes")}, true
	}
	return report.Finding{}, false
}

// tracedEnough says whether a dependency was seen long and busy enough
// to be judged: a connection that carried a handful of requests, or
// was looked at a few times, says nothing about a pool.
func tracedEnough(d *app.Dependency) bool {
	return d.Untimed == "" && d.Conns > 0 && d.Seconds >= 1 && d.Samples >= tracedSamples && d.RoundTripsPerSec*d.Seconds >= tracedRoundTrips
}
