package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

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
