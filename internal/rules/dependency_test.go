package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
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

// TestCheckTraced: without a load, a pool busy nearly all the time is
// saturated with its capacity; a long round trip on a used pool is
// slow; a multiplexed pool gets no number; an idle pool, a fast one and
// a handful of round trips get nothing.
func TestCheckTraced(t *testing.T) {
	multi := pool(0.95, 0)
	multi.Pipelined = 0.6
	few := pool(0.98, 20*time.Millisecond)
	few.RoundTripsPerSec = 10 // 40 round trips in 4 s
	slow := pool(0.4, 150*time.Millisecond)
	for _, tc := range []struct {
		name   string
		d      app.Dependency
		id     report.FindingID
		want   string
		absent string
	}{
		{"pool full", pool(0.98, 20*time.Millisecond), DependencyPoolSaturated, "4 connections, each busy ~98 %, ~20ms per round trip → at most ~200 req/s through this pool", ""},
		{"slow dependency", slow, DependencySlow, "~150ms per round trip", ""},
		{"multiplexed", multi, DependencySlow, "cannot be measured", "per round trip"},
		{"idle", pool(0.02, 20*time.Millisecond), "", "", ""},
		{"fast, busy half the time", pool(0.5, time.Millisecond), "", "", ""},
		// As busy as the client keeps it, the backend answering at once.
		{"fast, busy all the time", pool(0.97, 146*time.Microsecond), "", "", ""},
		{"1 ms, busy all the time", pool(0.97, time.Millisecond), DependencyPoolSaturated, "~1ms per round trip → at most ~4000 req/s", ""},
		{"a handful of round trips", few, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &app.Server{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Deps: []app.Dependency{tc.d}}
			fs := checkTraced(&evidence.Traced{Seconds: 4, IntervalMS: 100, Servers: []*app.Server{s}, Followed: 1}, nil)
			if tc.id == "" {
				if len(fs) > 0 {
					t.Fatalf("findings %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].ID != tc.id || !strings.Contains(fs[0].Title, tc.want) || tc.absent != "" && strings.Contains(fs[0].Title, tc.absent) {
				t.Fatalf("findings %+v, want %s with %q", fs, tc.id, tc.want)
			}
		})
	}
	if checkTraced(nil, nil) != nil {
		t.Error("findings without a trace")
	}
}

// TestCheckHostChain: without a load, an API whose pool waits on a
// middle service that waits on its own full pool gets its finding as
// the consequence of the middle one's, and no "bigger pool" advice: the
// middle service has no room for more requests. The middle one's own
// pool keeps its advice. A fast middle service leaves the API's finding
// on its own.
func TestCheckHostChain(t *testing.T) {
	toMid := pool(0.99, 80*time.Millisecond)
	toMid.Addr, toMid.Owner = "10.0.0.1:7400", "mid (pid 78)"
	front := &app.Server{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Deps: []app.Dependency{toMid}}
	for _, midBusy := range []float64{0.98, 0.2} {
		mid := &app.Server{Role: "front", Kind: "mid", Addr: "0.0.0.0:7400", PIDs: []int{78}, Deps: []app.Dependency{pool(midBusy, 20*time.Millisecond)}}
		fs := CheckHost(nil, &evidence.Traced{Seconds: 4, IntervalMS: 100, Servers: []*app.Server{front, mid}, Followed: 2}, nil)
		var api, m *report.Finding
		for i := range fs {
			switch {
			case strings.HasPrefix(fs[i].Subject, "api "):
				api = &fs[i]
			case strings.HasPrefix(fs[i].Subject, "mid "):
				m = &fs[i]
			}
		}
		if api == nil || api.ID != DependencyPoolSaturated {
			t.Fatalf("mid busy %.2f: findings %+v, want the API's saturated pool", midBusy, fs)
		}
		if midBusy < tracedBusy {
			if m != nil || api.CausedBy != "" || !strings.HasPrefix(fixOf(*api)[0], "a bigger pool") {
				t.Errorf("mid not saturated: mid finding %+v, API caused by %q, fix %q", m, api.CausedBy, fixOf(*api))
			}
			continue
		}
		if m == nil || m.ID != DependencyPoolSaturated || fs[0].Subject != m.Subject {
			t.Fatalf("findings %+v, want the middle service's saturated pool first", fs)
		}
		if api.CausedBy != DependencyPoolSaturated || api.CauseSubject != m.Subject {
			t.Errorf("API caused by %q %q, want %q", api.CausedBy, api.CauseSubject, m.Subject)
		}
		if !strings.HasPrefix(fixOf(*api)[0], "not a bigger pool: 10.0.0.1:7400 is itself at capacity") || !strings.HasPrefix(fixOf(*m)[0], "a bigger pool") {
			t.Errorf("fixes: API %q, mid %q", fixOf(*api)[0], fixOf(*m)[0])
		}
	}
	// The host's CPU 95 % busy: the middle service's own advice waits
	// for the CPU, the API's still names the middle service at capacity
	// (the known cause before the host's CPU).
	mid := &app.Server{Role: "front", Kind: "mid", Addr: "0.0.0.0:7400", PIDs: []int{78}, Deps: []app.Dependency{pool(0.98, 20*time.Millisecond)}}
	b := timeline(4, func(k int, s *evidence.Snapshot) {
		s.CPU[0].User += uint64(k * 190)
		s.CPU[0].Idle += uint64(k * 10)
	})
	fs := CheckHost(b, &evidence.Traced{Start: t0, Seconds: 4, IntervalMS: 100, Servers: []*app.Server{front, mid}, Followed: 2}, nil)
	fixes := map[string]string{}
	for _, f := range fs {
		if f.ID == DependencyPoolSaturated {
			fixes[strings.Fields(f.Subject)[0]] = fixOf(f)[0]
		}
	}
	if !strings.HasPrefix(fixes["api"], "not a bigger pool: 10.0.0.1:7400 is itself at capacity") ||
		!strings.HasPrefix(fixes["mid"], "not a bigger pool yet: the host's CPU is 95% busy") {
		t.Errorf("a busy host: fixes %q", fixes)
	}
	if CheckHost(nil, nil, nil) != nil {
		t.Error("findings from nothing")
	}
}
