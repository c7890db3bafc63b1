package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleCapacity() *Capacity {
	slo := SLO{Objectives: []Objective{{Percentile: 99, Bound: 250 * time.Millisecond}}, MaxErrorShare: 0.001, Text: "p99<=250ms, errors<=0.1%"}
	step := func(n int, phase string, rate, good float64, p99 time.Duration, pass bool, broke ...string) Step {
		return Step{N: n, Phase: phase, Rate: rate, Goodput: good, SuccessShare: 1, Pass: pass, Broke: broke, Opened: 8,
			Latency: []Quantile{{50, p99 / 2}, {90, p99 * 9 / 10}, {99, p99}, {99.9, p99}, {100, p99}}}
	}
	return &Capacity{Version: Version, Command: "capacity", URL: "http://10.0.0.2:8080/", SLO: slo,
		Verdict:     "CAPACITY: 80.3 req/s within p99<=250ms, errors<=0.1% (met at 80.3, broken at 82.1 req/s); limited by worker-pool-exhausted (python3 10.0.0.2:8080)",
		CapacityRPS: 80.3, Bracket: Bracket{Pass: 80.3, Fail: 82.1},
		Steps: []Step{step(1, "probe", 0, 78.6, 150*time.Millisecond, true), step(2, "search", 55, 55, 65*time.Millisecond, true),
			step(3, "search", 82.1, 79.5, 300*time.Millisecond, false, "p99 300.00ms > 250.00ms"), step(4, "search", 80.3, 79.4, 90*time.Millisecond, true),
			step(5, "diagnosis", 96.4, 79.6, 650*time.Millisecond, false, "p99 650.00ms > 250.00ms")},
		LimitedBy: []Limit{{Finding: Finding{ID: "worker-pool-exhausted", Severity: Critical, Status: Active, Subject: "python3 10.0.0.2:8080",
			Title: "python3 on 10.0.0.2:8080 serves with a pool of 4 workers, all busy", Evidence: []Item{{Text: "4 worker threads busy", Window: true}},
			Fix: []string{"raise the pool of python3 from 4 to 59 workers"}}, Basis: BasisFinding}},
		Headroom: []Headroom{{Resource: "worker-pool", Subject: "python3 10.0.0.2:8080", Share: 1, Text: "4.0 of 4 busy"},
			{Resource: "cpu", Subject: "server's host", Share: 0.173, Text: "17 % busy of 2 CPUs"}},
		Stopped: "converged: 80.3–82.1 req/s, within 2 %", Elapsed: 43 * time.Second, MaxDuration: time.Minute}
}

// TestCapacityText: the verdict, what limited it with evidence and fix,
// each step a row with its rate, goodput and percentiles and what broke
// it, the headroom, and the search's account.
func TestCapacityText(t *testing.T) {
	var w bytes.Buffer
	if err := CapacityText(&w, sampleCapacity()); err != nil {
		t.Fatal(err)
	}
	out := w.String()
	for _, s := range []string{"CAPACITY: 80.3 req/s", "Limited by:\n  python3 on 10.0.0.2:8080 serves with a pool of 4 workers, all busy (worker-pool-exhausted, python3 10.0.0.2:8080; the diagnosis's finding)",
		"    - 4 worker threads busy", "    fix: raise the pool", "phase  rate/s  conns  goodput/s  success", "p99       max  SLO",
		"82.1      8       79.5    100 %", "broke: p99 300.00ms > 250.00ms", "Headroom at 96.4 req/s (step 5)", "worker-pool  python3 10.0.0.2:8080  100 %",
		"Search: 5 steps in 43s of --max-duration 1m; converged"} {
		if !strings.Contains(out, s) {
			t.Errorf("text lacks %q:\n%s", s, out)
		}
	}
}

// TestCapacityHTML: one self-contained page with the curves against the
// offered rate (their script inlined only here), the steps and the
// headroom; a run's page is without that script.
func TestCapacityHTML(t *testing.T) {
	var w bytes.Buffer
	if err := CapacityHTML(&w, sampleCapacity()); err != nil {
		t.Fatal(err)
	}
	page := w.String()
	for _, s := range []string{`<canvas class="xychart"`, `data-x="[55,80.3,82.1,96.4]"`, "canvas.xychart", "<h2>Steps</h2>", "<h2>Headroom</h2>",
		"<h2>Against the offered rate</h2>", "<h2>Capacity</h2>", "SLO p99&lt;=250ms", "worker-pool-exhausted"} {
		if !strings.Contains(page, s) {
			t.Errorf("page lacks %q", s)
		}
	}
	if strings.Contains(page, "http://") && strings.Contains(page, "<script src") {
		t.Errorf("the page fetches a script")
	}
	var run bytes.Buffer
	if err := HTML(&run, &Page{Command: "run", Charts: []Chart{{Title: "x", Series: []Series{{Name: "a", Points: []float64{1}}}}}}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(run.String(), "xychart") {
		t.Errorf("a run's page carries the rate charts' script")
	}
}

// TestCapacityJSON: the contract's fields by name.
func TestCapacityJSON(t *testing.T) {
	b, err := json.Marshal(sampleCapacity())
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m["capacity_rps"] != 80.3 || m["slo"].(map[string]any)["text"] != "p99<=250ms, errors<=0.1%" {
		t.Errorf("capacity_rps %v, slo %v", m["capacity_rps"], m["slo"])
	}
	l := m["limited_by"].([]any)[0].(map[string]any)
	if l["id"] != "worker-pool-exhausted" || l["subject"] != "python3 10.0.0.2:8080" || l["basis"] != "finding" || l["evidence"] == nil {
		t.Errorf("limited_by[0] %v", l)
	}
	st := m["steps"].([]any)[2].(map[string]any)
	if st["rate"] != 82.1 || st["pass"] != false || st["latency"] == nil || st["goodput_rps"] != 79.5 {
		t.Errorf("steps[2] %v", st)
	}
}
