package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// distressRun is a healthy server side under a load of 2000 requests
// whose result change alters.
func distressRun(change func(*load.Result), snaps ...func(*evidence.Snapshot)) *Input {
	b := bundle(nil, all(snaps...))
	in := serverRun(b)
	lr := in.Run.Load
	lr.Requests, lr.Status = 2000, map[string]uint64{"2xx": 2000}
	lr.Latency = load.Latency{P50: time.Millisecond, P99: 3 * time.Millisecond, Max: 9 * time.Millisecond}
	for i := range 5 {
		lr.Timeline = append(lr.Timeline, load.Second{Index: i, Start: t0.Add(time.Duration(i) * time.Second), Length: time.Second, Requests: 400, OpenConns: 50})
	}
	change(lr)
	return &Input{Run: in.Run, Clean: []string{"accept and SYN queues", "CPU"}}
}

// TestDistress: what no rule explains is not healthy. A server that
// holds every tenth request 5 s (a tail no counter shows), requests that
// fail with nothing in the kernel to say why, a throughput that stops,
// connections left in CLOSE_WAIT: each is a finding with its numbers,
// what was found clean, and what to measure next.
func TestDistress(t *testing.T) {
	closeWait := func(s *evidence.Snapshot) {
		s.Sockets.Listeners = append(s.Sockets.Listeners, evidence.Listener{Proto: "tcp", Addr: "0.0.0.0:80", Port: 80, SendQ: 511, CloseWait: 16})
	}
	for _, tc := range []struct {
		name string
		in   *Input
		want string
	}{
		{"5 s every tenth request", distressRun(func(l *load.Result) { l.Latency.P99, l.Latency.Max = 5*time.Second, 5*time.Second }),
			"a slow tail: p99 5s against a p50 of 1ms (max 5s)"},
		{"timeouts", distressRun(func(l *load.Result) { l.Errors.Timeout = 40 }), "40 of 2040 requests failed (connect 0, read 0, write 0, timeout 40)"},
		{"5xx", distressRun(func(l *load.Result) { l.Status = map[string]uint64{"2xx": 1900, "5xx": 100} }), "100 of 2000 responses were 5xx"},
		{"stall", distressRun(func(l *load.Result) { l.Timeline[2].Requests = 0 }), "throughput fell to nothing for 1 whole second(s)"},
		{"close-wait", distressRun(func(*load.Result) {}, closeWait), "16 connections were left in CLOSE_WAIT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := checkDistress(tc.in)
			if len(fs) != 1 || fs[0].ID != UnexplainedDistress || fs[0].Severity != report.Critical || fs[0].Status != report.Active {
				t.Fatalf("findings %+v", fs)
			}
			if !hasEvidence(fs[0], tc.want) || !hasEvidence(fs[0], "checked and found nothing active: accept and SYN queues, CPU") {
				t.Errorf("evidence:\n%s", strings.Join(evidenceTexts(fs[0]), "\n"))
			}
			if !hasFix(fs[0], "offcputime") {
				t.Errorf("no next measurement: %q", fixOf(fs[0]))
			}
		})
	}
	// Quiet: a healthy load; a slow tail that an active finding explains;
	// a short tail in absolute terms.
	if fs := checkDistress(distressRun(func(*load.Result) {})); fs != nil {
		t.Errorf("healthy: %+v", fs)
	}
	in := distressRun(func(l *load.Result) { l.Latency.P99 = 5 * time.Second })
	in.Found = []report.Finding{{ID: AppSlow, Status: report.Active}}
	if fs := checkDistress(in); fs != nil {
		t.Errorf("explained by app-slow: %+v", fs)
	}
	in.Found = []report.Finding{{ID: AppSlow, Status: report.Latent}}
	if fs := checkDistress(in); len(fs) != 1 {
		t.Errorf("a latent finding explains nothing that happened: %+v", fs)
	}
	// A SYN queue answered with cookies (a warning) lost no connection:
	// it cannot be why requests failed. SYNs dropped (critical) can.
	in = distressRun(func(l *load.Result) { l.Errors.Connect = 40 })
	in.Found = []report.Finding{{ID: SynQueueOverflow, Severity: report.Warning, Status: report.Active}}
	if fs := checkDistress(in); len(fs) != 1 {
		t.Errorf("SYN cookies explained 40 failed connections: %+v", fs)
	}
	in.Found[0].Severity = report.Critical
	if fs := checkDistress(in); fs != nil {
		t.Errorf("SYNs dropped did not explain 40 failed connections: %+v", fs)
	}
	if fs := checkDistress(distressRun(func(l *load.Result) { l.Latency.P99 = 20 * time.Millisecond })); fs != nil {
		t.Errorf("a 20 ms p99: %+v", fs)
	}
}
