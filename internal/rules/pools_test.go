package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// namedPool is a run against a server whose n worker threads are named
// family+N, sampled once before the load (each idle in a futex of its
// own), five times during it (busy in wait, or idle as before when
// busy is false for its index), and once after: 50 connections, 1000
// requests in 5 s, mean latency 250 ms (50 requests in flight).
func namedPool(kind, family string, n int, wait func(i, tid int) (class, w, peer string)) *Input {
	start := t0
	b := &evidence.Bundle{Host: evidence.Host{Hostname: "web1"}}
	for i := range 6 {
		s := healthy(start.Add(time.Duration(i) * time.Second))
		s.Sockets.Listeners = []evidence.Listener{{Proto: "tcp", Addr: "0.0.0.0:8080", Port: 8080, SendQ: 4096, Established: 50, PIDs: []int{300}, Process: kind}}
		b.Snapshots = append(b.Snapshots, s)
	}
	s := &app.Server{Role: "front", Kind: kind, Addr: "0.0.0.0:8080", PIDs: []int{300}}
	idle := func(tid int) app.Thread {
		return app.Thread{TID: tid, Name: family + fmt.Sprint(tid-1000), Class: app.WaitLock, Wait: fmt.Sprintf("futex 0x7eff5000%04x", tid*0x100+0x6c)}
	}
	sample := func(at time.Time, load int) app.Sample {
		smp := app.Sample{Time: at, Workers: 1, Waits: map[string]int{}}
		for k := range n {
			tid := 1001 + k
			th := idle(tid)
			if load >= 0 {
				if c, w, p := wait(load, tid); c != "" {
					th.Class, th.Wait, th.Peer = c, w, p
				}
			}
			smp.Threads = append(smp.Threads, th)
			smp.Waits[th.Class]++
		}
		// A thread of its own name (a timer): no pool.
		smp.Threads = append(smp.Threads, app.Thread{TID: 999, Name: "Timer-0", Class: app.WaitRunning})
		return smp
	}
	s.Samples = append(s.Samples, sample(start.Add(-500*time.Millisecond), -1))
	for i := range 5 {
		s.Samples = append(s.Samples, sample(start.Add(time.Duration(i)*time.Second+100*time.Millisecond), i))
	}
	s.Samples = append(s.Samples, sample(start.Add(5500*time.Millisecond), -1))
	r := &evidence.Run{LoadStart: start, LoadEnd: start.Add(5 * time.Second), Servers: []*app.Server{s}, Port: "8080",
		Load: &load.Result{Connections: 50, Requests: 1000, DurationS: 5, Status: map[string]uint64{"2xx": 1000},
			Latency: load.Latency{Mean: 250 * time.Millisecond, P50: 250 * time.Millisecond, P99: 300 * time.Millisecond}},
		Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}}}
	return &Input{Run: r}
}

// sleeping: a worker asleep in the request, on a timed futex elsewhere
// than its idle one (Thread.sleep's event, not its queue's parker).
func sleeping(_, tid int) (string, string, string) {
	return app.WaitLock, fmt.Sprintf("futex 0x7eff5000%04x timed", tid*0x100+0x778), ""
}

// TestWorkerPoolNamedThreads: a pool found from its threads' names and
// waits, in a JVM (an executor's pool-1-thread-N asleep in the request)
// and in a second kind of server (Tomcat's connector threads reading
// from a database): all busy while Little's law puts 50 requests in
// flight for 4 threads, with no queue in the kernel. Quiet: a roomy
// pool, workers idle in their own condition variable's other futex
// word, workers on the CPU, as many threads as requests in flight.
func TestWorkerPoolNamedThreads(t *testing.T) {
	fs := checkWorkerPool(namedPool("java", "pool-1-thread-", 4, sleeping))
	if len(fs) != 1 || fs[0].ID != WorkerPoolExhausted || fs[0].Subject != "java 0.0.0.0:8080" {
		t.Fatalf("findings %+v", fs)
	}
	f := fs[0]
	for _, w := range []string{"java (pid 300): threads pool-1-thread-* (4), all busy in 5 of 5 sampled seconds, 4.0 busy on average; each waited on: a timed wait",
		"in flight: 200 requests/s × 250ms mean latency ≈ 50 requests at once (Little's law) for 4 workers: ~46 waited for one, inside the process",
		"service time ≈ 20ms (4.0 busy workers / 200 requests/s); mean latency 250ms: ~230ms of it waiting for a worker"} {
		if !hasEvidence(f, w) {
			t.Errorf("no evidence %q in\n%s", w, strings.Join(evidenceTexts(f), "\n"))
		}
	}
	if !strings.Contains(f.Title, "pool of 4 threads (pool-1-thread-*)") || !strings.Contains(fixOf(f)[0], "from 4 to 56 threads") || !strings.Contains(fixOf(f)[0], "Executors.newFixedThreadPool") {
		t.Errorf("title %q fix %q", f.Title, fixOf(f))
	}
	tomcat := namedPool("java", "http-nio-8080-exec-", 10, func(_, tid int) (string, string, string) {
		return app.WaitNetwork, "read 0x1a", "10.0.0.9:5432"
	})
	if fs := checkWorkerPool(tomcat); len(fs) != 1 || !strings.Contains(fs[0].Title, "pool of 10 threads (http-nio-8080-exec-*)") ||
		!strings.Contains(fixOf(fs[0])[0], "maxThreads") || !hasEvidence(fs[0], "reading from 10.0.0.9:5432 100%") {
		t.Errorf("tomcat: %+v", fs)
	}
	for name, in := range map[string]*Input{
		"roomy": namedPool("java", "pool-1-thread-", 64, func(i, tid int) (string, string, string) {
			if tid%16 != i {
				return "", "", ""
			}
			return sleeping(i, tid)
		}),
		"the idle condition's other word": namedPool("java", "pool-1-thread-", 4, func(_, tid int) (string, string, string) {
			return app.WaitLock, fmt.Sprintf("futex 0x7eff5000%04x", tid*0x100+0x68), ""
		}),
		"on the CPU":                     namedPool("java", "pool-1-thread-", 4, func(int, int) (string, string, string) { return app.WaitRunning, "", "" }),
		"no more in flight than threads": namedPool("java", "pool-1-thread-", 64, sleeping),
	} {
		if fs := checkWorkerPool(in); len(fs) != 0 {
			t.Errorf("%s: %+v", name, keys(fs))
		}
	}
}

// TestWaits: per request of the load, the full pool's service time and
// the wait for a worker; a leg's time, the network's share, the part a
// delayed ACK held, and the wait for a connection of its full pool.
func TestWaits(t *testing.T) {
	in := namedPool("java", "pool-1-thread-", 4, sleeping)
	r := in.Run
	r.Servers[0].Deps = []app.Dependency{{Addr: "10.0.0.9:5432", Conns: 4, Busy: 1, Seconds: 5, RoundTripsPerSec: 100, RoundTrip: 40 * time.Millisecond, MinRTT: 50 * time.Microsecond,
		Nagle: &app.Nagle{Answers: 0.5}}}
	w := Waits(r)
	if w == nil || len(w.Pools) != 1 || len(w.Dependencies) != 1 {
		t.Fatalf("waits %+v", w)
	}
	if p := w.Pools[0]; p.Server != "java 0.0.0.0:8080" || p.Threads != "pool-1-thread-*" || p.Size != 4 || p.Service != 20*time.Millisecond || p.Wait != 230*time.Millisecond {
		t.Errorf("pool %+v", p)
	}
	// 100 round trips/s for 200 requests/s: half a round trip per
	// request, 20 ms, 25 µs of it the network's, 10 ms held; the pool
	// busy all the time, the rest of the 250 ms mean waited for it.
	if d := w.Dependencies[0]; d.RoundTrips != 0.5 || d.Time != 20*time.Millisecond || d.Network != 25*time.Microsecond || d.Stall != 10*time.Millisecond || d.ConnWait != 230*time.Millisecond {
		t.Errorf("dependency %+v", d)
	}
	if Waits(&evidence.Run{}) != nil {
		t.Errorf("waits without a load")
	}
}

// TestNagleDependency: Nagle on a leg to a dependency, named with the
// side to fix: answers the dependency's end held back (read on its
// socket, its TCP_NODELAY off), answers paused a delayed-ACK timeout
// with that end not seen (the pattern, a warning), requests the
// server's own end held back; nothing where nothing was held.
func TestNagleDependency(t *testing.T) {
	run := func(n *app.Nagle) []report.Finding {
		s := &app.Server{Kind: "node", Addr: "0.0.0.0:8080", Deps: []app.Dependency{{Addr: "10.0.0.9:7300", Conns: 4, Busy: 0.97, Seconds: 4, RoundTripsPerSec: 90, RoundTrip: 43 * time.Millisecond, Nagle: n}}}
		return checkNagle(&Input{Run: &evidence.Run{Servers: []*app.Server{s}, Load: &load.Result{Requests: 400}}})
	}
	fs := run(&app.Nagle{Answers: 0.49, NoDelay: "on", PeerNoDelay: "off", Pause: 40 * time.Millisecond, PauseShare: 0.9, DelayedACK: 40 * time.Millisecond, AcksPerRequest: 2})
	if len(fs) != 1 || fs[0].Subject != "node 0.0.0.0:8080 → 10.0.0.9:7300" || fs[0].Severity != report.Critical || !strings.HasPrefix(fixOf(fs[0])[0], "on 10.0.0.9:7300 (the side that sends the answers)") ||
		!hasEvidence(fs[0], "TCP_NODELAY on 10.0.0.9:7300's sockets that held answers: off") || !hasEvidence(fs[0], "held bytes its application had written, unsent while a segment was unacknowledged, in 49% of the looks") {
		t.Errorf("answers held: %+v", fs)
	}
	fs = run(&app.Nagle{Pause: 36 * time.Millisecond, PauseShare: 0.9, DelayedACK: 40 * time.Millisecond})
	if len(fs) != 1 || fs[0].Severity != report.Warning || !strings.Contains(fs[0].Title, "the pattern of Nagle") || !strings.HasPrefix(fixOf(fs[0])[0], "check TCP_NODELAY where 10.0.0.9:7300 runs") {
		t.Errorf("answers paused, that end not seen: %+v", fs)
	}
	fs = run(&app.Nagle{Requests: 0.3, NoDelay: "off"})
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Title, "Requests from node 0.0.0.0:8080") || !strings.HasPrefix(fixOf(fs[0])[0], "on node") || !hasEvidence(fs[0], "TCP_NODELAY on node's connections to 10.0.0.9:7300: off") {
		t.Errorf("requests held: %+v", fs)
	}
	for name, n := range map[string]*app.Nagle{
		"nothing held":         nil,
		"a pause not the ato":  {Pause: 20 * time.Millisecond, PauseShare: 0.9, DelayedACK: 40 * time.Millisecond},
		"a backend's own 50ms": {Pause: 48 * time.Millisecond, PauseShare: 0.9, DelayedACK: 40 * time.Millisecond},
		"autocorking, rarely":  {Answers: 0.02},
	} {
		if fs := run(n); len(fs) != 0 {
			t.Errorf("%s: %+v", name, keys(fs))
		}
	}
}
