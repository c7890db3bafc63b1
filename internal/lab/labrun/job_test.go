package labrun

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
	"github.com/netdoctor/netdoctor/internal/source"
)

// TestJobRoundTrip: what the lab hands its child arrives as the same
// options: every field a run or a capacity search reads, and none of
// the hooks a command sets on them (which travel as nothing, not as an
// error).
func TestJobRoundTrip(t *testing.T) {
	slo, err := capacity.ParseSLO([]string{"p99<=250ms,errors<=1%"})
	if err != nil {
		t.Fatal(err)
	}
	ld := load.Options{URL: "http://10.0.0.2/", Connections: 400, Threads: 2, Duration: 5 * time.Second, Timeout: 3 * time.Second,
		NoKeepAlive: true, Header: []string{"X-A: 1"}, Body: []byte("a=1"), Ramp: &load.Ramp{From: 1, To: 400, Over: time.Second}}
	ro := run.Options{Load: ld, ServerNetNS: netns.NS{Name: "srv", Path: "/run/netns/srv", Inode: 4026532246}, Baseline: time.Second, Tail: time.Second,
		DNS: true, ProfileHz: 99, ServerAgent: &source.RemoteConfig{URL: "http://10.0.0.2:9120", Token: []byte("secret")}}
	twin := ro
	twin.ServerAgent, twin.ServerTwin = nil, ro.ServerAgent
	for _, j := range []Job{
		{Run: &ro, Reports: Outputs{JSON: "/r/before.json", HTML: "/r/x.html", Bundle: "/r/before.bundle.json"}},
		{Run: &ro, Verify: "/r/plan.json", Reports: Outputs{JSON: "/r/verify.json"}},
		{Run: &twin, Reports: Outputs{JSON: "/r/before.json", TwinJSON: "/r/before.agent.json"}},
		{Capacity: &capacity.Options{Load: load.Options{URL: ld.URL}, Run: run.Options{ServerNetNS: ro.ServerNetNS, DNS: true}, SLO: slo, MaxDuration: 90 * time.Second},
			Verify: "/r/plan.json", Reports: Outputs{JSON: "/r/capacity.json", HTML: "/r/capacity.html"}},
	} {
		want := j
		// The hooks a command sets: not data, and dropped on the way.
		hooked := j
		if j.Run != nil {
			r := *j.Run
			r.OnPhase = func(string, time.Duration) {}
			r.Load.OnStart, r.Load.OnSecond, r.Load.ScriptOut = func() {}, func(load.Second) {}, &bytes.Buffer{}
			hooked.Run = &r
		} else {
			c := *j.Capacity
			c.OnStep, c.OnPhase = func(report.Step) {}, func(string, time.Duration) {}
			hooked.Capacity = &c
		}
		b, err := json.Marshal(hooked)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		got, err := ReadJob(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("ReadJob(%s): %v", b, err)
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("sent %s\ngot  %+v\nwant %+v", b, got, want)
		}
	}
}

// TestReadJobRefuses: anything but one run or one capacity search, an
// unknown field (a job from another version), or an endless stdin is a
// one-line error.
func TestReadJobRefuses(t *testing.T) {
	for _, in := range []string{
		``, `{}`, `{"Reports":{"JSON":"x"}}`,
		`{"Run":{},"Capacity":{}}`,
		`{"Run":{},"Frob":1}`,
		`{"Run":{"Load":{"Script":{}}}}`,
		`{"Capacity":{},"Reports":{"Bundle":"b"}}`,
		`{"Run":{},"Reports":{"TwinJSON":"a.json"}}`,
		`{"Run":{"ServerTwin":{"URL":"http://10.0.0.2:9120"}}}`,
		`{"Run":{"Load":{"URL":"` + strings.Repeat("a", maxJob) + `"}}}`,
	} {
		if _, err := ReadJob(strings.NewReader(in)); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("ReadJob(%.40q): %v", in, err)
		}
	}
}
