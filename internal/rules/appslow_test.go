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

// idleCPU returns a change that adds ticks to the host's CPUs, busy for
// the given share of them.
func idleCPU(busy float64) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		s.CPU[0].User += uint64(200 * busy)
		s.CPU[0].Idle += uint64(200 * (1 - busy))
	}
}

// slowRun is a run whose server's workers spent their busy samples as
// waits says, with a p50 of 120 ms and the host's CPU busy for busy.
func slowRun(busy float64, waits map[string]int, kind string) *Input {
	b := bundle(nil, idleCPU(busy))
	s := &app.Server{Role: "front", Kind: kind, Addr: "0.0.0.0:8080", PIDs: []int{300}}
	for i := range 3 {
		s.Samples = append(s.Samples, app.Sample{Time: t0.Add(time.Duration(i) * 300 * time.Millisecond), Workers: 8, Waits: waits})
	}
	in := serverRun(b, s)
	in.Run.Load.Latency = load.Latency{P50: 120 * time.Millisecond, P99: 300 * time.Millisecond}
	in.Bundle, in.Side = nil, ""
	return in
}

// TestAppSlow: a server that holds requests while its CPU idles, and
// what its workers wait on names the fix, for a php-fpm pool and for a
// program netdoctor has no configuration of.
func TestAppSlow(t *testing.T) {
	for _, tc := range []struct {
		kind  string
		waits map[string]int
		fix   string
	}{
		{"php-fpm", map[string]int{app.WaitSleep: 7, app.WaitRunning: 1}, "remove or shorten the sleeps in the request path"},
		{"python3", map[string]int{app.WaitLock: 6, app.WaitIdle: 2}, "find the contended lock"},
	} {
		fs := checkAppSlow(slowRun(0.1, tc.waits, tc.kind))
		if len(fs) != 1 || fs[0].ID != AppSlow || fs[0].Subject != tc.kind+" 0.0.0.0:8080" || fs[0].Side != report.Server {
			t.Fatalf("%s: checkAppSlow = %+v", tc.kind, fs)
		}
		if !strings.HasPrefix(fixOf(fs[0])[0], tc.fix) {
			t.Errorf("%s: fix %q, want it to start with %q", tc.kind, fixOf(fs[0])[0], tc.fix)
		}
		if !hasEvidence(fs[0], "server CPU 10% busy") {
			t.Errorf("%s: evidence %q", tc.kind, evidenceTexts(fs[0]))
		}
	}
	// Quiet: the CPU is the limit; a cause of latency is named already;
	// fast responses.
	if fs := checkAppSlow(slowRun(0.9, map[string]int{app.WaitRunning: 8}, "python3")); fs != nil {
		t.Errorf("busy CPU: %+v", fs)
	}
	in := slowRun(0.1, map[string]int{app.WaitSleep: 8}, "php-fpm")
	in.Found = []report.Finding{{ID: WorkerPoolExhausted, Status: report.Active}}
	if fs := checkAppSlow(in); fs != nil {
		t.Errorf("with the pool's finding: %+v", fs)
	}
	// A server that waits on a dependency: when netdoctor observes the
	// dependency and its workers block, app-slow is about the dependency
	// (nginx waits on php-fpm, whose workers wait on a file lock); when
	// the dependency is opaque, its finding is as far as the evidence
	// goes.
	in = slowRun(0.1, map[string]int{app.WaitFile: 8}, "php-fpm")
	in.Run.Servers[0].Addr = "127.0.0.1:9000"
	nginx := &app.Server{Role: "front", Kind: "nginx", Addr: "0.0.0.0:80", PIDs: []int{200}}
	in.Run.Servers = append([]*app.Server{nginx}, in.Run.Servers...)
	in.Found = []report.Finding{{ID: DependencySlow, Status: report.Active, Subject: "nginx 0.0.0.0:80 → 127.0.0.1:9000",
		About: report.About{Server: "nginx", Listen: "0.0.0.0:80", Remotes: []string{"127.0.0.1:9000"}}}}
	if fs := checkAppSlow(in); len(fs) != 1 || fs[0].Subject != "php-fpm 127.0.0.1:9000" {
		t.Errorf("waiting on an observed php-fpm: %+v", fs)
	}
	in.Found[0].Subject, in.Found[0].About.Remotes = "nginx 0.0.0.0:80 → 10.0.0.9:5432", []string{"10.0.0.9:5432"}
	if fs := checkAppSlow(in); fs != nil {
		t.Errorf("waiting on a dependency not observed: %+v", fs)
	}
	// A Go backend's threads park on futexes whether its goroutines work
	// or not: that names no cause.
	in.Found[0].Subject, in.Found[0].About.Remotes = "nginx 0.0.0.0:80 → 127.0.0.1:9000", []string{"127.0.0.1:9000"}
	for i := range in.Run.Servers[1].Samples {
		in.Run.Servers[1].Samples[i].Waits = map[string]int{app.WaitLock: 5, app.WaitIdle: 3}
	}
	if fs := checkAppSlow(in); fs != nil {
		t.Errorf("waiting on a dependency whose threads sit on futexes: %+v", fs)
	}
	in = slowRun(0.1, map[string]int{app.WaitSleep: 8}, "php-fpm")
	in.Run.Load.Latency.P50 = 2 * time.Millisecond
	if fs := checkAppSlow(in); fs != nil {
		t.Errorf("fast responses: %+v", fs)
	}
}
