package capacity

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestWorkersLoad: a step's workers' results, read from their stdout,
// merge into one outcome: the counts summed, the percentiles of the
// merged histogram (the highest latency is the highest worker's, the
// median between theirs), each worker started with its own segment and
// the common start; a worker that fails fails the step, saying which.
// The results are real loads of a loopback server (a second each).
func TestWorkersLoad(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	dir := t.TempDir()
	step := load.Options{URL: srv.URL, Connections: 4, Threads: 1, Rate: 200, Duration: time.Second, Measure: 250 * time.Millisecond, Timeout: time.Second}
	var one [2]*load.Result
	for i := range 2 {
		o, err := load.Segment{Index: i + 1, Count: 2}.Share(step)
		if err != nil {
			t.Fatal(err)
		}
		r, err := load.Run(context.Background(), o)
		if err != nil {
			t.Fatal(err)
		}
		r.KeepHistograms()
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, strings.Replace(o.Segment.String(), "/", "of", 1)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		one[i] = r
	}
	var mu sync.Mutex // the workers start at once
	var got []string
	w := Workers{N: 2, Lead: time.Millisecond, Command: func(o load.Options, seg load.Segment, start time.Time) *exec.Cmd {
		mu.Lock()
		got = append(got, seg.String()+"@"+start.Format(time.RFC3339Nano))
		mu.Unlock()
		return exec.Command("cat", filepath.Join(dir, strings.Replace(seg.String(), "/", "of", 1)))
	}}
	res, err := w.Load(context.Background(), step)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	if len(got) != 2 || !strings.HasPrefix(got[0], "1/2@") || got[0][3:] != got[1][3:] {
		t.Errorf("workers started as %v: want 1/2 and 2/2 at one start", got)
	}
	out := outcomeOf(res, false)
	m0, m1 := one[0].Measured, one[1].Measured
	if out.answered != m0.Requests+m1.Requests || out.answered == 0 || out.good != out.answered {
		t.Errorf("merged step: %d answered, %d good; want the workers' %d + %d", out.answered, out.good, m0.Requests, m1.Requests)
	}
	if hi := max(m0.Percentile(100), m1.Percentile(100)); out.percentile(100) != hi {
		t.Errorf("merged max %v, want the workers' highest %v", out.percentile(100), hi)
	}
	if p := out.percentile(50); p < min(m0.Percentile(50), m1.Percentile(50)) || p > max(m0.Percentile(50), m1.Percentile(50)) {
		t.Errorf("merged median %v outside the workers' %v, %v", p, m0.Percentile(50), m1.Percentile(50))
	}
	s := judge(report.SLO{Objectives: []report.Objective{{Percentile: 99, Bound: time.Second}}, MaxErrorShare: 0.001}, 200, out)
	if s.Goodput == 0 || len(s.Latency) == 0 {
		t.Errorf("step judged on the merged result: %+v", s)
	}

	w.Command = func(o load.Options, seg load.Segment, start time.Time) *exec.Cmd {
		if seg.Index == 2 {
			return exec.Command("sh", "-c", "echo 'netdoctor: connect refused' >&2; exit 2")
		}
		return exec.Command("cat", filepath.Join(dir, "1of2"))
	}
	if _, err := w.Load(context.Background(), step); err == nil || !strings.Contains(err.Error(), "worker 2/2") || !strings.Contains(err.Error(), "connect refused") {
		t.Errorf("a failed worker: %v; want it named with its error", err)
	}
}
