package report_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestRead reads each kind of report netdoctor writes back into a Run:
// a real run report as it was written, a check report, a load report's
// flat layout; a bundle or another version is a KindError.
func TestRead(t *testing.T) {
	runJSON, err := os.ReadFile("../../testdata/runs/golden/nginx-php-throughput.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Read(bytes.NewReader(runJSON))
	if err != nil {
		t.Fatal(err)
	}
	if r.Command != "run" || r.Load == nil || len(r.Sides) != 2 || len(r.Servers) == 0 || len(r.Findings) == 0 {
		t.Fatalf("run report read as command %q, load %v, %d sides, %d servers, %d findings", r.Command, r.Load != nil, len(r.Sides), len(r.Servers), len(r.Findings))
	}
	again, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.TrimSpace(string(runJSON)), string(again)); diff != "" {
		t.Errorf("run report written back mismatch (-want +got):\n%s", diff)
	}

	chk, err := report.Read(strings.NewReader(`{"version":1,"command":"check","verdict":"HEALTHY: no problem found","findings":[]}`))
	if err != nil || chk.Command != "check" || chk.Load != nil || chk.Verdict != "HEALTHY: no problem found" {
		t.Errorf("check report: %+v, %v", chk, err)
	}

	var lb bytes.Buffer
	res := &load.Result{URL: "http://127.0.0.1/", Requests: 42, RPS: 4.2, Saturated: true}
	if err := json.NewEncoder(&lb).Encode(report.NewLoad(res, []report.Finding{{ID: "load-generator-saturated", Side: report.Client}})); err != nil {
		t.Fatal(err)
	}
	ld, err := report.Read(&lb)
	if err != nil || ld.Command != "load" || ld.Load == nil || ld.Load.Requests != 42 || len(ld.Findings) != 1 {
		t.Errorf("load report: %+v, %v", ld, err)
	}

	for _, s := range []string{`{"version":1,"host":{},"snapshots":[]}`, `{"version":3,"command":"run"}`, `{"version":1,"command":"plan"}`} {
		_, err := report.Read(strings.NewReader(s))
		var k *report.KindError
		if !errors.As(err, &k) {
			t.Errorf("Read(%s) = %v, want a KindError", s, err)
		}
	}
	if _, err := report.Read(strings.NewReader("nope")); err == nil || !strings.Contains(err.Error(), "not a netdoctor report") {
		t.Errorf("Read(garbage) = %v", err)
	}
}

// TestReadV1: a report of version 1 (a real run's, as netdoctor wrote it
// then) reads into version 2's vocabulary: the status in the verdict's
// words, the load's status classes, the rates and the listeners under
// their names, and the actions listed; a version-1 load report too. A
// newer report is refused with the version in one line.
func TestReadV1(t *testing.T) {
	b, err := os.ReadFile("testdata/v1/run.json")
	if err != nil {
		t.Fatal(err)
	}
	r, err := report.Read(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if r.Version != report.Version || r.Status != report.OutcomeUnhealthy || !strings.HasPrefix(r.Verdict, "UNHEALTHY: ") {
		t.Errorf("version %d, status %q, verdict %q; want %d, unhealthy", r.Version, r.Status, r.Verdict, report.Version)
	}
	if r.Load == nil || r.Load.Status["2xx"] == 0 || r.Load.Timeline[1].Status[2] == 0 {
		t.Errorf("load's status classes not read: %+v", r.Load)
	}
	if _, ok := r.Summary.Rates["TcpPassiveOpens"]; !ok || len(r.Summary.Listeners) == 0 || r.Summary.Listeners[0].SendQ == 0 {
		t.Errorf("rates %v, listeners %+v: want nstat names and the backlogs", r.Summary.Rates, r.Summary.Listeners)
	}
	if len(r.Actions) == 0 {
		t.Error("no actions listed")
	}
	out, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, old := range []string{`"send_q"`, `"recv_q"`, `"Tcp.PassiveOpens"`, `"status":{`, `"status":"findings"`} {
		if bytes.Contains(out, []byte(old)) {
			t.Errorf("written back, it still says %s", old)
		}
	}
	ld, err := report.Read(strings.NewReader(`{"version":1,"command":"load","findings":[],"url":"http://127.0.0.1/","requests":3,"status":{"2xx":2,"5xx":1}}`))
	if err != nil || ld.Load.Status["5xx"] != 1 {
		t.Errorf("a version-1 load report: %+v, %v", ld, err)
	}
	_, err = report.Read(strings.NewReader(`{"version":3,"command":"check"}`))
	if err == nil || !strings.Contains(err.Error(), "a netdoctor check report of version 3, newer than this netdoctor reads") {
		t.Errorf("a newer report: %v", err)
	}
}

// TestRunPagePartialSecond: the load's last second, 20 ms long, would
// plot as 500 requests a second from 10 responses: it is left out of the
// charts, and a half-second remainder is kept as the rate it is.
func TestRunPagePartialSecond(t *testing.T) {
	tl := []load.Second{}
	for i := range 3 {
		tl = append(tl, load.Second{Index: i, Length: time.Second, Requests: 100})
	}
	run := func(last time.Duration) *report.Run {
		r := &report.Run{Report: &report.Report{}, Load: &load.Result{Timeline: append(slices.Clone(tl), load.Second{Index: 3, Length: last, Requests: 10})}}
		return r
	}
	p := report.RunPage(run(20*time.Millisecond), time.Unix(0, 0), nil, report.Server)
	if got := p.Charts[0].Series[0].Points; len(got) != 3 {
		t.Errorf("requests/s with a 20 ms remainder: %v, want the 3 whole seconds", got)
	}
	p = report.RunPage(run(500*time.Millisecond), time.Unix(0, 0), nil, report.Server)
	if got := p.Charts[0].Series[0].Points; len(got) != 4 || got[3] != 20 {
		t.Errorf("requests/s with a half-second remainder: %v, want its rate, 20", got)
	}
}
