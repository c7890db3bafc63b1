package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/load"
)

// depRun is a run of 4 s, 800 requests at 50 connections with a p50 of
// p50, the host's CPU busy for busy, whose server (a Go API) sends to
// one dependency.
func depRun(busy float64, p50 time.Duration, d app.Dependency) *Input {
	b := bundle(nil, idleCPU(busy))
	s := &app.Server{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Deps: []app.Dependency{d}}
	in := serverRun(b, s)
	in.Run.Load = &load.Result{Connections: 50, Requests: 800, DurationS: 4, Latency: load.Latency{P50: p50, P99: 2 * p50}}
	in.Bundle, in.Side = nil, ""
	return in
}

// pool is 4 connections to a backend that answers in 20 ms, busy for
// busy, one round trip per request at 200 requests/s.
func pool(busy float64, rt time.Duration) app.Dependency {
	return app.Dependency{Addr: "10.0.0.1:7300", Owner: "backend (pid 77)", Observed: true, Conns: 4, Seconds: 4, Samples: 40,
		Busy: busy, RoundTripsPerSec: 200, RoundTrip: rt, SegsOutPerSec: 200, SegsInPerSec: 200}
}

// TestDependency: the pool is full and the p50 is 12 round trips, the
// dependency is most of the p50, or neither; a multiplexed connection
// says the estimate cannot hold.
func TestDependency(t *testing.T) {
	multi := pool(0.9, 20*time.Millisecond)
	multi.Pipelined = 0.5
	for _, tc := range []struct {
		name  string
		in    *Input
		id    string
		title string
		fix   string
	}{
		{"pool full", depRun(0.1, 250*time.Millisecond, pool(0.98, 20*time.Millisecond)), string(DependencyPoolSaturated),
			"api 10.0.0.1:8080 waits on 10.0.0.1:7300 (backend (pid 77)): 4 connections, each busy ~98 %, ~20ms per round trip → at most ~200 req/s; the p50 is 12 × that", "a bigger pool: from 4 to about"},
		{"pool full, host CPU busy", depRun(0.9, 250*time.Millisecond, pool(0.98, 20*time.Millisecond)), string(DependencyPoolSaturated), "4 connections", "not a bigger pool: 10.0.0.1:7300 (backend (pid 77)) has no spare capacity"},
		{"slow dependency", depRun(0.1, 60*time.Millisecond, pool(0.5, 40*time.Millisecond)), string(DependencySlow),
			"~40ms per round trip, 1.0 per request, 67% of the p50 60ms", "cache its answers"},
		{"multiplexed", depRun(0.1, 250*time.Millisecond, multi), string(DependencySlow), "cannot be measured", "multiplexed connection"},
		{"fast dependency", depRun(0.1, 250*time.Millisecond, pool(0.05, time.Millisecond/10)), "", "", ""},
		{"fast response", depRun(0.1, 10*time.Millisecond, pool(0.98, 2*time.Millisecond)), "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := checkDependency(tc.in)
			if tc.id == "" {
				if len(fs) != 0 {
					t.Fatalf("findings %+v", fs)
				}
				return
			}
			if len(fs) != 1 || string(fs[0].ID) != tc.id {
				t.Fatalf("findings %+v, want one %s", fs, tc.id)
			}
			if !strings.Contains(fs[0].Title, tc.title) || !hasFix(fs[0], tc.fix) {
				t.Errorf("title %q fix %q", fs[0].Title, fixOf(fs[0]))
			}
			if !hasEvidence(fs[0], "10.0.0.1:7300 (backend (pid 77)): 4 connections") {
				t.Errorf("evidence %q", evidenceTexts(fs[0]))
			}
		})
	}
}
