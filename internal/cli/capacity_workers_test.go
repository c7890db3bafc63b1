package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// TestWorkerArgs: a capacity step's worker is the whole step's load
// command (the worker takes its share), its segment, the common start,
// the result on stdout and the measured part from the step's warm-up;
// read back by load's own flags, the shares sum to the step.
func TestWorkerArgs(t *testing.T) {
	start := time.Date(2026, 11, 28, 17, 0, 0, 123456789, time.UTC)
	step := load.Options{URL: "http://10.0.0.2:8080/", Connections: 45, Threads: 2, Rate: 83.2, Duration: 3500 * time.Millisecond,
		Measure: 875 * time.Millisecond, Timeout: 2 * time.Second, Header: []string{"X-A: b c"}}
	a := workerArgs(step, load.Segment{Index: 2, Count: 3}, start)
	want := []string{"-c", "45", "-t", "2", "-d", "3.5s", "-R", "83.2", "--timeout", "2s", "-H", "X-A: b c",
		"--segment", "2/3", "--start-at", "2026-11-28T17:00:00.123456789Z", "--json", "-", "--debug-measure-from", "875ms", "http://10.0.0.2:8080/"}
	if !slices.Equal(a, want) {
		t.Errorf("worker args\n%q\nwant\n%q", a, want)
	}
	var conns int
	var rate float64
	for i := 1; i <= 3; i++ {
		o, err := load.Segment{Index: i, Count: 3}.Share(step)
		if err != nil {
			t.Fatal(err)
		}
		conns += o.Connections
		rate += o.Rate
	}
	if conns != 45 || rate < 83.2-1e-9 || rate > 83.2+1e-9 {
		t.Errorf("shares sum to %d connections, %g req/s; want the step's 45, 83.2", conns, rate)
	}
}

// TestCapacityWorkersFlags: bad --workers are one line and exit 2;
// --kubernetes prints the controller's plan and runs nothing.
func TestCapacityWorkersFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--workers", "-1"},
		{"--kubernetes"},
		{"--workers", "3", "-c", "2"},
		{"--workers", "2", "--verify-with", "plan.json"},
	} {
		var out bytes.Buffer
		if code := Run(t.Context(), append(append([]string{"capacity"}, args...), "http://127.0.0.1:1/"), &out, &out); code != ExitUsage || strings.Count(strings.TrimSpace(out.String()), "\n") > 0 {
			t.Errorf("capacity %v: exit %d, %q; want exit %d and one line", args, code, out.String(), ExitUsage)
		}
	}
	var out bytes.Buffer
	if code := Run(t.Context(), []string{"capacity", "--workers", "3", "--kubernetes", "-c", "30", "http://web.perf:8080/"}, &out, &out); code != ExitOK {
		t.Fatalf("capacity --workers 3 --kubernetes: exit %d\n%s", code, out.String())
	}
	for _, s := range []string{"Indexed Jobs of worker pods", "kind: RoleBinding", "serviceAccountName: netdoctor-capacity", "- --kube-api\n", "- in-cluster\n", "- --workers\n"} {
		if !strings.Contains(out.String(), s) {
			t.Errorf("the controller's plan lacks %q:\n%s", s, out.String())
		}
	}
}
