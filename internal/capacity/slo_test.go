package capacity

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

func TestParseSLO(t *testing.T) {
	for _, c := range []struct {
		in   []string
		text string
	}{
		{nil, "p99<=500ms, errors<=0.1%"},
		{[]string{"p99<=100ms"}, "p99<=100ms, errors<=0.1%"},
		{[]string{"p99.9 <= 1s", "P50<20ms"}, "p50<=20ms, p99.9<=1s, errors<=0.1%"},
		{[]string{"p99<=250ms,errors<=1%"}, "p99<=250ms, errors<=1%"},
		{[]string{"errors<=0%"}, "p99<=500ms, errors<=0%"},
		{[]string{"p100<=2s"}, "p100<=2s, errors<=0.1%"},
		{[]string{"p90<=1m30s"}, "p90<=1m30s, errors<=0.1%"},
	} {
		slo, err := ParseSLO(c.in)
		if err != nil || slo.Text != c.text {
			t.Errorf("%q: %q, %v; want %q", c.in, slo.Text, err, c.text)
		}
	}
	for _, bad := range []string{"p99", "p99<=", "<=1s", "p0<=1s", "p101<=1s", "pxx<=1s", "p99<=fast", "p99<=1", "p99<=0s", "p99<=2h",
		"errors<=1", "errors<=100%", "errors<=-1%", "p99<=1s,p99<=2s", "errors<=1%,errors<=2%", "latency<=1s", "p99>=1s", "pNaN<=1s"} {
		if _, err := ParseSLO([]string{bad}); err == nil || strings.Count(err.Error(), "\n") != 0 || !strings.HasPrefix(err.Error(), "--slo ") {
			t.Errorf("%q: err %v, want one line naming --slo", bad, err)
		}
	}
}

// constant is an outcome whose every percentile is d.
func constant(d time.Duration) func(float64) time.Duration {
	return func(float64) time.Duration { return d }
}

func TestJudge(t *testing.T) {
	slo := mustSLO(t, "p99<=100ms", "p50<=20ms", "errors<=1%")
	for _, c := range []struct {
		name  string
		rate  float64
		o     outcome
		pass  bool
		broke string
	}{
		{"met", 100, outcome{seconds: 4, answered: 400, good: 400, percentile: constant(10 * time.Millisecond)}, true, ""},
		{"p99 over", 100, outcome{seconds: 4, answered: 400, good: 400, percentile: func(p float64) time.Duration {
			return time.Duration(p) * 2 * time.Millisecond
		}}, false, "p99 198.00ms > 100.00ms"},
		{"p50 over", 100, outcome{seconds: 4, answered: 400, good: 400, percentile: constant(50 * time.Millisecond)}, false, "p50 50.00ms > 20.00ms"},
		{"errors within", 100, outcome{seconds: 4, answered: 398, good: 398, failed: 2, percentile: constant(10 * time.Millisecond)}, true, ""},
		{"5xx over", 100, outcome{seconds: 4, answered: 400, good: 390, percentile: constant(10 * time.Millisecond)}, false, "2.5 % of the requests failed > 1.0 %"},
		{"queue grew", 100, outcome{seconds: 4, answered: 360, good: 360, percentile: constant(10 * time.Millisecond)}, false, "requests ended at 90.0/s of the 100/s sent: a queue grew"},
		{"edge slack", 5, outcome{seconds: 4, answered: 18, good: 18, percentile: constant(10 * time.Millisecond)}, true, ""},
		{"unsent", 100, outcome{seconds: 4, answered: 390, good: 390, unsent: 10, percentile: constant(10 * time.Millisecond)}, false, "10 requests still waited for a free connection at the end"},
		{"nothing ended", 100, outcome{seconds: 4, percentile: constant(0)}, false, "no request ended"},
		{"collapsed", 100, outcome{seconds: 1, answered: 100, good: 100, collapsed: true, percentile: constant(10 * time.Millisecond)}, false, "collapsed"},
	} {
		s := judge(slo, c.rate, c.o)
		if s.Pass != c.pass || c.broke != "" && !strings.Contains(strings.Join(s.Broke, "; "), c.broke) {
			t.Errorf("%s: pass %v, broke %q; want %v, %q", c.name, s.Pass, s.Broke, c.pass, c.broke)
		}
	}
	s := judge(slo, 100, outcome{seconds: 4, answered: 400, good: 396, failed: 4, percentile: constant(10 * time.Millisecond)})
	if s.Goodput != 99 || s.Throughput != 101 || s.Errors != 8 || s.SuccessShare != 396.0/404 {
		t.Errorf("goodput %v, throughput %v, errors %d, success %v", s.Goodput, s.Throughput, s.Errors, s.SuccessShare)
	}
	if v, ok := s.At(99.9); !ok || v != 10*time.Millisecond {
		t.Errorf("p99.9 %v %v", v, ok)
	}
}

func TestCollapsing(t *testing.T) {
	for _, c := range []struct {
		sec  load.Second
		rate float64
		want bool
	}{
		{load.Second{Length: time.Second, Requests: 100, Status: [6]uint64{2: 100}}, 100, false},
		{load.Second{Length: time.Second, Requests: 100, Status: [6]uint64{2: 40, 5: 60}}, 100, true},
		{load.Second{Length: time.Second, Requests: 10, Errors: load.Errors{Timeout: 30}}, 100, true},
		{load.Second{Length: time.Second}, 100, true},
		{load.Second{Length: time.Second}, 5, false},
		{load.Second{Length: time.Second, Requests: 3, Errors: load.Errors{Connect: 4}}, 5, false},
	} {
		if got := collapsing(c.sec, c.rate); got != c.want {
			t.Errorf("%+v at %v/s: %v, want %v", c.sec, c.rate, got, c.want)
		}
	}
}

// TestLimitedBy: the findings of the diagnosed step that explain the
// broken SLO, causes only, failures first, then what was full, then
// what slowed; a full resource no rule named; the load generator alone
// when it limited.
func TestLimitedBy(t *testing.T) {
	f := func(id report.FindingID, sev report.Severity, failed uint64, cause report.FindingID) report.Finding {
		return report.Finding{ID: id, Severity: sev, Status: report.Active, Failed: failed, CausedBy: cause, Title: string(id)}
	}
	ids := func(ls []report.Limit) string {
		var s []string
		for _, l := range ls {
			s = append(s, string(l.ID)+"/"+l.Basis)
		}
		return strings.Join(s, " ")
	}
	fs := []report.Finding{
		f(rules.CPUSaturated, report.Warning, 0, ""),
		f(rules.ConntrackTableFull, report.Critical, 50, ""),
		f(rules.AcceptQueueOverflow, report.Critical, 0, rules.WorkerPoolExhausted),
		f(rules.RiskySysctl, report.Warning, 0, ""),
		{ID: rules.EphemeralPortExhaustion, Severity: report.Warning, Status: report.Latent},
	}
	head := []report.Headroom{
		{Resource: "worker-pool", Subject: "python3 10.0.0.1:8080", Share: 1, Finding: rules.WorkerPoolExhausted, Text: "4 of 4"},
		{Resource: "cpu", Subject: "server host", Share: 0.95, Finding: rules.CPUSaturated, Active: true},
		{Resource: "conntrack", Subject: "nf_conntrack server", Share: 0.3, Finding: rules.ConntrackTableFull},
	}
	if got := ids(limitedBy(fs, head, nil, false)); got != "conntrack-table-full/finding worker-pool-exhausted/headroom cpu-saturated/finding" {
		t.Errorf("limited by %s", got)
	}
	// Only the unexplained distress: a resource at or near its limit is
	// what ran out (the host's CPUs at 95 %, or at 80 % shared by the
	// servers and the load generator), not "unexplained"; with every
	// resource well below its limit, the distress is.
	only := []report.Finding{f(rules.UnexplainedDistress, report.Critical, 0, "")}
	if got := ids(limitedBy(only, head[1:], nil, false)); got != "cpu-saturated/headroom" {
		t.Errorf("unexplained: limited by %s", got)
	}
	near := []report.Headroom{{Resource: "cpu", Subject: "server's host", Share: 0.8, Finding: rules.CPUSaturated}, head[2]}
	if got := ids(limitedBy(only, near, nil, false)); got != "cpu-saturated/headroom" {
		t.Errorf("CPUs at 80 %%: limited by %s", got)
	}
	low := []report.Headroom{{Resource: "cpu", Subject: "server's host", Share: 0.5, Finding: rules.CPUSaturated}, head[2]}
	if got := ids(limitedBy(only, low, nil, false)); got != "unexplained-distress/finding" {
		t.Errorf("CPUs at 50 %%: limited by %s", got)
	}
	// Nothing near its limit, but 1234 connections waited in php-fpm's
	// accept queue of 4096 (CI run 31: TestTuneLab's capacity after the
	// plan, the host's CPUs 72 % busy): where the requests waited is
	// named, not "unexplained"; a handful waiting is no such place.
	waited := append(slices.Clone(low), report.Headroom{Resource: "accept-queue", Subject: "127.0.0.1:9000", Used: 1234, Limit: 4096, Share: 0.3, Finding: rules.AcceptQueueOverflow})
	if got := ids(limitedBy(only, waited, nil, false)); got != "accept-queue-overflow/queued" {
		t.Errorf("1234 connections waited to be accepted: limited by %s", got)
	}
	waited[len(waited)-1].Used = 5
	if got := ids(limitedBy(only, waited, nil, false)); got != "unexplained-distress/finding" {
		t.Errorf("5 connections waited to be accepted: limited by %s", got)
	}
	// The diagnosed step met the SLO (the knee moved): its slow tail
	// within the SLO limited nothing; the fullest resource is named as
	// the fullest, not "unexplained" (CI of stop 43: TestTuneLab's
	// capacity after the plan).
	if got := ids(limitedBy(only, low, nil, true)); got != "cpu-saturated/fullest" {
		t.Errorf("diagnosed step met, CPUs at 50 %%: limited by %s", got)
	}
	if got := ids(limitedBy(only, nil, nil, true)); got != "unexplained-distress/finding" {
		t.Errorf("diagnosed step met, no resource measured: limited by %s", got)
	}
	if got := ids(limitedBy(fs, head, []string{"thread 0 was on CPU 97% of the run"}, false)); got != "load-generator-saturated/load-generator" {
		t.Errorf("generator: limited by %s", got)
	}
}
