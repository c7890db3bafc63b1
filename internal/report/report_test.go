package report_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

func loadBundle(t *testing.T, path string) *evidence.Bundle {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bundle evidence.Bundle
	if err := json.Unmarshal(b, &bundle); err != nil {
		t.Fatal(err)
	}
	return &bundle
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := "testdata/" + name + ".golden"
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/report -update)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}

// TestGolden renders the captured accept-overflow bundle in both formats.
func TestGolden(t *testing.T) {
	b := loadBundle(t, "../../testdata/bundles/accept-overflow.json")
	r := report.New("diagnose", b, rules.Check(b))
	var text, js bytes.Buffer
	if err := report.Text(&text, r); err != nil {
		t.Fatal(err)
	}
	if err := report.JSON(&js, r); err != nil {
		t.Fatal(err)
	}
	golden(t, "accept-overflow.txt", text.Bytes())
	golden(t, "accept-overflow.json", js.Bytes())
}

// TestPartialAndVerdict: a failed collector marks the report partial, and
// the verdict follows the findings.
func TestPartialAndVerdict(t *testing.T) {
	t0 := evidence.Snapshot{Status: []evidence.Status{{Collector: "kmsg", State: "ok"}}}
	t1 := evidence.Snapshot{Status: []evidence.Status{{Collector: "kmsg", State: "unavailable", Error: "open /dev/kmsg: permission denied"}}}
	b := &evidence.Bundle{Snapshots: []evidence.Snapshot{t0, t1}}
	r := report.New("check", b, nil)
	if !r.Partial || r.Collectors[0].State != "unavailable" {
		t.Errorf("partial = %v, collectors = %+v; want partial with kmsg unavailable", r.Partial, r.Collectors)
	}
	if r.Verdict != "HEALTHY: no problem found" {
		t.Errorf("verdict = %q", r.Verdict)
	}
	latent := []report.Finding{{ID: "risky-sysctl", Severity: "warning", Status: "latent", Title: "x"}}
	if v := report.New("check", b, latent).Verdict; v != "LATENT: OK now, 1 latent risk(s) that will hurt at scale" {
		t.Errorf("verdict with a latent finding = %q", v)
	}
	if v := report.New("check", &evidence.Bundle{Snapshots: []evidence.Snapshot{t0}}, nil).Verdict; v[:10] != "INCOMPLETE" {
		t.Errorf("verdict with one snapshot = %q", v)
	}
}

// TestRunTextAgent: a side observed through an agent says so, with the
// clocks' offset; a side whose agent was lost says when its evidence
// ends.
func TestRunTextAgent(t *testing.T) {
	b := loadBundle(t, "../../testdata/bundles/accept-overflow.json")
	r := &report.Run{Report: report.New("run", b, nil), Load: &load.Result{}, Sides: []*evidence.SideInfo{
		{Name: report.Server, Observed: true, Agent: "http://10.0.0.2:9120", ClockOffset: -1500 * time.Microsecond, ClockUncertainty: 120 * time.Microsecond,
			Lost: "evidence ends at 12:00:03: agent http://10.0.0.2:9120 unreachable: connection refused"},
		{Name: report.Client, Observed: true},
	}}
	var out bytes.Buffer
	if err := report.RunText(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"server side observed through the agent at http://10.0.0.2:9120; its clock is 1.5ms behind this host's (± 120µs)",
		"PARTIAL: the server side's evidence ends at 12:00:03: agent http://10.0.0.2:9120 unreachable: connection refused; its findings rest on what came before",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "client side observed through") {
		t.Errorf("the client side was observed here, not through an agent")
	}
}
