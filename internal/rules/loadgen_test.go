package rules

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestLoadGen: the generator's own judgement becomes a client-side
// warning with its reasons; a load that was not limited says nothing.
func TestLoadGen(t *testing.T) {
	res := &load.Result{Saturated: true, SaturatedBy: []string{"thread 1 busy 98% of the run", "12 connects failed: no local port"}}
	fs := checkLoadGen(&Input{Run: &evidence.Run{Load: res}})
	if len(fs) != 1 || fs[0].ID != LoadGeneratorSaturated || fs[0].Side != report.Client || fs[0].Status != report.Active {
		t.Fatalf("checkLoadGen = %+v", fs)
	}
	if len(fs[0].Evidence) != 2 || fs[0].Evidence[1].Text != "12 connects failed: no local port" {
		t.Errorf("evidence %+v", fs[0].Evidence)
	}
	for _, in := range []*Input{{Run: &evidence.Run{Load: &load.Result{Requests: 100}}}, {Run: &evidence.Run{}}, {}} {
		if fs := checkLoadGen(in); fs != nil {
			t.Errorf("checkLoadGen(%+v) = %+v, want nothing", in.Run, fs)
		}
	}
}
