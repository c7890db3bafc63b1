package agent

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestDependencyMetrics: the last trace's dependencies are /metrics
// series labelled without the owner's pid, at most 8 destinations per
// server, no time per round trip for a multiplexed pool; the diagnosis
// makes the saturated pool's finding from them; a trace older than two
// periods is dropped.
func TestDependencyMetrics(t *testing.T) {
	a := newTestAgent(t, Config{Recent: 3 * time.Second, DepEvery: 5 * time.Second})
	now := time.Now()
	feed(t, a, now.Add(-time.Second), fixture(t).Snapshots[:1])
	api := &app.Server{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}}
	api.Deps = append(api.Deps,
		app.Dependency{Addr: "10.0.0.1:7300", Owner: "backend (pid 77)", Conns: 4, Seconds: 3, Samples: 30, Busy: 0.98, RoundTripsPerSec: 196, RoundTrip: 20 * time.Millisecond},
		app.Dependency{Addr: "10.0.0.9:6379", Owner: "redis-server (pid 9)", Conns: 1, Seconds: 3, Samples: 30, Busy: 0.5, RoundTripsPerSec: 900, Pipelined: 0.6})
	for i := range 10 {
		api.Deps = append(api.Deps, app.Dependency{Addr: "10.0.1." + strconv.Itoa(i) + ":5432", Conns: 1, Seconds: 3, Samples: 30, Busy: 0.01, RoundTripsPerSec: 1, RoundTrip: time.Millisecond})
	}
	a.deps.last = &evidence.Traced{Start: now.Add(-3 * time.Second), Seconds: 3, IntervalMS: 100, Servers: []*app.Server{api}, Followed: 1}
	a.deps.doneAt, a.deps.conns, a.deps.took = now, 15, 3*time.Millisecond
	a.evaluate(now)
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	_, m := get(t, srv, agentapi.PathMetrics, testToken)
	l := `{app="api",destination="10.0.0.1:7300",listener="10.0.0.1:8080",owner="backend"}`
	for _, want := range []string{
		"netdoctor_dependency_connections" + l + " 4",
		"netdoctor_dependency_busy_ratio" + l + " 0.98",
		"netdoctor_dependency_round_trip_seconds" + l + " 0.02",
		"netdoctor_dependency_round_trips_per_second" + l + " 196",
		`netdoctor_dependency_round_trips_per_second{app="api",destination="10.0.0.9:6379",listener="10.0.0.1:8080",owner="redis-server"} 900`,
		"netdoctor_agent_dependency_trace_connections 15",
		`netdoctor_finding_active{id="dependency-pool-saturated",severity="critical",target="api 10.0.0.1:8080 → 10.0.0.1:7300"} 1`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("no %s in\n%s", want, grep(m, "dependency"))
		}
	}
	if strings.Contains(m, `netdoctor_dependency_round_trip_seconds{app="api",destination="10.0.0.9:6379"`) {
		t.Errorf("a round trip for the multiplexed pool:\n%s", grep(m, "round_trip_seconds"))
	}
	if n := strings.Count(m, "netdoctor_dependency_connections{"); n != maxDepDestinations {
		t.Errorf("%d destinations, want %d:\n%s", n, maxDepDestinations, grep(m, "dependency_connections"))
	}
	problems, err := testutil.GatherAndLint(a.registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	if a.Current().Dependencies == nil || !hasFinding(a.Current(), rules.DependencyPoolSaturated) {
		t.Errorf("the diagnosis has no traced dependencies or finding: %+v", a.Current().Findings)
	}
	a.evaluate(now.Add(time.Minute))
	if a.traced(now.Add(time.Minute)) != nil || hasFinding(a.Current(), rules.DependencyPoolSaturated) {
		t.Errorf("a trace a minute old still judged")
	}
}

func hasFinding(r *report.Report, id report.FindingID) bool {
	for _, f := range r.Findings {
		if f.ID == id {
			return true
		}
	}
	return false
}
