package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestCheckTraced: without a load, a pool busy nearly all the time is
// saturated with its capacity; a long round trip on a used pool is
// slow; a multiplexed pool gets no number; an idle pool, a fast one and
// a handful of round trips get nothing.
func TestCheckTraced(t *testing.T) {
	multi := pool(0.95, 0)
	multi.Pipelined = 0.6
	few := pool(0.98, 20*time.Millisecond)
	few.RoundTripsPerSec = 10 // 40 round trips in 4 s
	slow := pool(0.4, 150*time.Millisecond)
	for _, tc := range []struct {
		name   string
		d      app.Dependency
		id     report.FindingID
		want   string
		absent string
	}{
		{"pool full", pool(0.98, 20*time.Millisecond), DependencyPoolSaturated, "4 connections, each busy ~98 %, ~20ms per round trip → at most ~200 req/s through this pool", ""},
		{"slow dependency", slow, DependencySlow, "~150ms per round trip", ""},
		{"multiplexed", multi, DependencySlow, "cannot be measured", "per round trip"},
		{"idle", pool(0.02, 20*time.Millisecond), "", "", ""},
		{"fast, busy half the time", pool(0.5, time.Millisecond), "", "", ""},
		// As busy as the client keeps it, the backend answering at once.
		{"fast, busy all the time", pool(0.97, 146*time.Microsecond), "", "", ""},
		{"1 ms, busy all the time", pool(0.97, time.Millisecond), DependencyPoolSaturated, "~1ms per round trip → at most ~4000 req/s", ""},
		{"a handful of round trips", few, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &app.Server{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Deps: []app.Dependency{tc.d}}
			fs := CheckTraced(&report.Traced{Seconds: 4, IntervalMS: 100, Servers: []*app.Server{s}, Followed: 1}, nil)
			if tc.id == "" {
				if len(fs) > 0 {
					t.Fatalf("findings %+v", fs)
				}
				return
			}
			if len(fs) != 1 || fs[0].ID != tc.id || !strings.Contains(fs[0].Title, tc.want) || tc.absent != "" && strings.Contains(fs[0].Title, tc.absent) {
				t.Fatalf("findings %+v, want %s with %q", fs, tc.id, tc.want)
			}
		})
	}
	if CheckTraced(nil, nil) != nil {
		t.Error("findings without a trace")
	}
}
