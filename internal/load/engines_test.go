package load

import (
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"
)

// eachEngine runs f once per engine, each forced (Options.Engine), as
// the subtests "epoll" and "io_uring": one suite for both, for what the
// engines do differently (connecting, sending, receiving, closing,
// their errors, TLS over them, their timers). Where this host refuses
// io_uring, its half is skipped, saying why, rather than run again on
// epoll. The halves run one after the other, not in parallel: most of
// these tests count what a run achieves, and two runs in one process
// take each other's CPUs (a run's scripted delays came out at a third
// of their rate).
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

// oneEngine runs f on eng alone, as the subtest of that name: for a
// test of what the engines share (the state machine's pacing, ramps and
// rate sampling; a script's request(), response(), done() and stop),
// which would only double CI's time if run on both. The tests that use
// it name epoll and io_uring in turn, so that each engine carries some
// of them; TestEnginesAgree compares the two on one paced run. Where
// this host refuses io_uring, epoll runs it instead.
func oneEngine(t *testing.T, eng Engine, f func(t *testing.T, eng Engine)) {
	t.Helper()
	if runtime.GOOS != "linux" {
		f(t, EngineAuto)
		return
	}
	if _, _, err := choose(eng); err != nil {
		t.Logf("%v: on epoll instead", err)
		eng = EngineEpoll
	}
	t.Run(string(eng), func(t *testing.T) { f(t, eng) })
}

// TestEnginesAgree: on the same server, the two engines measure the same
// latencies: an open loop at a fixed rate against a server that takes
// about 2 ms gives the same percentiles (within the noise of a shared
// machine), the same timeline and the same count. (The stall that only
// coordinated-omission correction shows is TestRateShowsStall's, run
// against each engine.)
func TestEnginesAgree(t *testing.T) {
	if _, _, err := choose(EngineIOUring); err != nil {
		t.Skip(err)
	}
	s := newCounting(t, func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(2 * time.Millisecond) // the service time under test
		io.WriteString(w, "ok\n")
	})
	// A first run pays for the server's goroutines and the runtime's
	// warm-up, which only it shows (CI run 17: epoll first, p90 7.3 ms
	// and p99 28.7 ms against io_uring's 4.1 and 11.2): one not compared.
	mustRun(t, Options{Engine: EngineEpoll, URL: s.URL, Rate: 400, Duration: 500 * time.Millisecond, Connections: 20, Threads: 2})
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
	if !near(e.Latency.P90, u.Latency.P90, 3*time.Millisecond) {
		t.Errorf("p90: epoll %v, io_uring %v: want within 3 ms", e.Latency.P90, u.Latency.P90)
	}
	if e.LatencyAll == nil || u.LatencyAll == nil || !near(e.LatencyAll.P50, u.LatencyAll.P50, 1500*time.Microsecond) {
		t.Errorf("every request's latency (with coordinated-omission correction): epoll %+v, io_uring %+v: want both, p50 within 1.5 ms", e.LatencyAll, u.LatencyAll)
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
}
