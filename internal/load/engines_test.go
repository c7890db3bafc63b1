package load

import (
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// eachEngine runs f once per engine, each forced (Options.Engine), as
// the subtests "epoll" and "io_uring": one suite for both. Where this
// host refuses io_uring, its half is skipped, saying why, rather than
// run again on epoll.
func eachEngine(t *testing.T, f func(t *testing.T, eng Engine)) {
	t.Helper()
	if runtime.GOOS != "linux" {
		f(t, EngineAuto)
		return
	}
	for _, eng := range []Engine{EngineEpoll, EngineIOUring} {
		t.Run(string(eng), func(t *testing.T) {
			if _, _, err := choose(eng); err != nil {
				t.Skip(err)
			}
			f(t, eng)
		})
	}
}

// TestEnginesAgree: on the same server, the two engines measure the same
// latencies: an open loop at a fixed rate against a server that takes
// about 2 ms gives the same percentiles (within the noise of a shared
// machine), the same timeline and the same count; and the stall that
// only coordinated-omission correction shows is in both.
func TestEnginesAgree(t *testing.T) {
	if _, _, err := choose(EngineIOUring); err != nil {
		t.Skip(err)
	}
	s := newCounting(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * time.Millisecond) // the service time under test
		io.WriteString(w, "ok\n")
	})
	res := map[Engine]*Result{}
	for _, eng := range []Engine{EngineEpoll, EngineIOUring} {
		res[eng] = mustRun(t, Options{Engine: eng, URL: s.URL, Rate: 400, Duration: 2 * time.Second, Connections: 20, Threads: 2})
		if got := res[eng].Engine; got != eng {
			t.Fatalf("asked for %s, ran %s", eng, got)
		}
	}
	e, u := res[EngineEpoll], res[EngineIOUring]
	t.Logf("epoll: p50 %v p99 %v, %d requests; io_uring: p50 %v p99 %v, %d requests",
		e.Latency.P50, e.Latency.P99, e.Requests, u.Latency.P50, u.Latency.P99, u.Requests)
	near := func(a, b, slack time.Duration) bool { return a-b <= slack && b-a <= slack }
	if !near(e.Latency.P50, u.Latency.P50, 1500*time.Microsecond) || e.Latency.P50 < 2*time.Millisecond || u.Latency.P50 < 2*time.Millisecond {
		t.Errorf("p50: epoll %v, io_uring %v: want both ≥ the 2 ms service time and within 1.5 ms", e.Latency.P50, u.Latency.P50)
	}
	// The last, partial second is in a timeline when anything ended in
	// it: one run may have one second more.
	if d := int64(e.Requests) - int64(u.Requests); d < -40 || d > 40 || len(e.Timeline) < 2 || len(u.Timeline) < 2 ||
		len(e.Timeline)-len(u.Timeline) > 1 || len(u.Timeline)-len(e.Timeline) > 1 {
		t.Errorf("requests %d and %d, timeline %d and %d seconds: want the same paced run", e.Requests, u.Requests, len(e.Timeline), len(u.Timeline))
	}
	for i := range 2 { // the two whole seconds
		if a, b := e.Timeline[i].Requests, u.Timeline[i].Requests; a < 360 || b < 360 || a > 440 || b > 440 {
			t.Errorf("second %d: %d and %d responses, want 400 ± 10%% in both", i, a, b)
		}
	}
	for _, eng := range []Engine{EngineEpoll, EngineIOUring} {
		r := mustRun(t, Options{Engine: eng, URL: stallServer(t, time.Second).URL, Rate: 200, Duration: 3 * time.Second, Connections: 10, Threads: 1})
		if r.Latency.P99 < 800*time.Millisecond || r.LatencyAll == nil || r.LatencyAll.P99 < 800*time.Millisecond {
			t.Errorf("%s: open-loop p99 %v with a 1 s stall, want ≥ 800ms", eng, r.Latency.P99)
		}
	}
}
