package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

// TestJudge: each change's verdict follows its findings and counters
// before and after.
func TestJudge(t *testing.T) {
	f := func(id report.FindingID, sev report.Severity, status report.Status, counter string) report.Finding {
		return report.Finding{ID: id, Severity: sev, Status: status, Evidence: []report.Item{{Text: "x", Source: counter, Window: true}}}
	}
	rate := func(m map[string]float64) func(string) float64 { return func(s string) float64 { return m[s] } }
	p := &Plan{Changes: []Change{
		{Key: "a", Findings: []string{"accept-queue-overflow"}},
		{Key: "b", Findings: []string{"conntrack-table-full"}},
		{Key: "c", Findings: []string{"nagle-delayed-ack"}},
		{Key: "d", Findings: []string{"upstream-connection-churn"}},
		{Key: "e", Findings: []string{"dns-slow"}},
		{Key: "f", Findings: []string{"ephemeral-port-exhaustion"}},
		{Key: "g", Findings: []string{"syn-queue-overflow"}},
	}, Seen: map[string]string{"ephemeral-port-exhaustion": "critical active"}}
	before := Outcome{Findings: []report.Finding{
		f("accept-queue-overflow", report.Critical, report.Active, "TcpExt.ListenOverflows"),
		f("conntrack-table-full", report.Critical, report.Active, "conntrack.drop"),
		f("nagle-delayed-ack", report.Warning, report.Active, "TcpExt.DelayedACKs"),
		f("upstream-connection-churn", report.Warning, report.Active, "Tcp.ActiveOpens"),
		f("syn-queue-overflow", report.Warning, report.Active, "TcpExt.ListenDrops"),
	}, Rate: rate(map[string]float64{"TcpExt.ListenOverflows": 100, "TcpExt.DelayedACKs": 50, "Tcp.ActiveOpens": 1000, "TcpExt.ListenDrops": 40})}
	after := Outcome{Findings: []report.Finding{
		f("conntrack-table-full", report.Warning, report.Latent, "conntrack.drop"),
		f("nagle-delayed-ack", report.Critical, report.Active, "TcpExt.DelayedACKs"),
		f("upstream-connection-churn", report.Warning, report.Active, "Tcp.ActiveOpens"),
		f("syn-queue-overflow", report.Warning, report.Active, "TcpExt.ListenDrops"),
	}, Rate: rate(map[string]float64{"Tcp.ActiveOpens": 500, "TcpExt.ListenDrops": 35})}
	want := map[string]string{"a": Fixed, "b": Fixed, "c": Worse, "d": Improved, "e": NotJudged, "f": NotJudged, "g": NoEffect}
	for _, v := range Judge(p, before, after) {
		if v.Verdict != want[v.Key] {
			t.Errorf("%s: %s, want %s (%v → %v)", v.Key, v.Verdict, want[v.Key], v.Before, v.After)
		}
		// A change not judged says what the plan was made against.
		if v.Key == "f" && !strings.Contains(v.Note, "ephemeral-port-exhaustion critical active") {
			t.Errorf("f: note %q does not say what the plan's report had", v.Note)
		}
	}
}
