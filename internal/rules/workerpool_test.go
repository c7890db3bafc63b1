package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// poolRun is a run against a php-fpm pool of 4 workers sampled for 4 s.
func poolRun(smp func(i int) app.Sample) *Input {
	start := time.Unix(1000, 0)
	s := &app.Server{Role: "upstream", Kind: "php-fpm", Addr: "127.0.0.1:9000",
		Pool: &app.PoolInfo{Name: "www", MaxChildren: app.Setting{Value: 4, Source: "/etc/php/www.conf:7"}}}
	for i := range 4 {
		x := smp(i)
		x.Time = start.Add(time.Duration(i)*time.Second + time.Millisecond)
		s.Samples = append(s.Samples, x)
	}
	return &Input{Run: &evidence.Run{LoadStart: start, LoadEnd: start.Add(4 * time.Second), Servers: []*app.Server{s},
		Load: &load.Result{Connections: 50, Requests: 1000, Status: map[string]uint64{"2xx": 1000}}}}
}

// TestWorkerPoolKeptAlive: with fastcgi_keep_conn every worker holds a
// connection and php-fpm's status page calls them all active, while their
// wait channels show them reading their own client: not a full pool.
func TestWorkerPoolKeptAlive(t *testing.T) {
	r := poolRun(func(int) app.Sample {
		return app.Sample{Workers: 4, Waits: map[string]int{app.WaitIdle: 3, app.WaitRunning: 1},
			Pool: &app.PoolStatus{Active: 4, Total: 4, ListenQueue: 1}}
	})
	if fs := checkWorkerPool(r); len(fs) != 0 {
		t.Errorf("kept-alive workers reported as a full pool: %+v", fs)
	}
}

// TestWorkerPoolFull: every worker asleep in the request, requests
// queued, status page silent: a full pool, its setting named.
func TestWorkerPoolFull(t *testing.T) {
	r := poolRun(func(i int) app.Sample {
		return app.Sample{Workers: 4, Waits: map[string]int{app.WaitSleep: 4}, StatusBusy: i > 0,
			Pool: map[bool]*app.PoolStatus{true: {Active: 4, Total: 4, ListenQueue: 30}}[i == 0]}
	})
	fs := checkWorkerPool(r)
	if len(fs) != 1 || fs[0].ID != "worker-pool-exhausted" || fs[0].Subject != "php-fpm pool www" {
		t.Fatalf("findings %+v", fs)
	}
	want := []string{"all 4 workers busy in 4 of 4 sampled seconds", "did not answer within 0.8 s in 3 of 4 seconds",
		"listen queue peaked at 30", "busy workers were: sleep 100%"}
	for _, w := range want {
		found := false
		for _, e := range fs[0].Evidence {
			found = found || strings.Contains(e.Text, w)
		}
		if !found {
			t.Errorf("no evidence %q in %+v", w, fs[0].Evidence)
		}
	}
	// Sized as tune plan sizes it: the run's 50 connections, an eighth
	// spare, one for the status page.
	if fixOf(fs[0])[0] != "raise pm.max_children = 4 → 57 in /etc/php/www.conf:7: 50 requests in flight and 6 spare, one for the status page" {
		t.Errorf("fix %q", fixOf(fs[0])[0])
	}
}

// withCPU gives each of a pythonPool's samples a second of its 6
// threads' accounting: runDelay waiting for a CPU, onCPU on one.
func withCPU(in *Input, runDelay, onCPU time.Duration) {
	for i := range in.Run.Servers[0].Samples {
		in.Run.Servers[0].Samples[i].CPU = &app.CPU{Span: time.Second, Threads: 6, ThreadTime: 6 * time.Second,
			OnCPU: onCPU, RunDelay: runDelay, CPUs: 2, IdleCPUs: 0.1}
	}
}

// pythonPool is a run against a Python server with a pool of 4 worker
// threads, each request 50 ms asleep: 50 connections, 400 requests in
// 5 s (80/s), p50 620 ms. waits is what its 6 threads (the pool, an
// acceptor, the main thread) were doing each second; unread how many
// requests waited in their connections.
func pythonPool(waits map[string]int, unread int, cpu float64) *Input {
	start := t0
	snap := func(i int) evidence.Snapshot {
		s := healthy(start.Add(time.Duration(i) * time.Second))
		s.CPU[0].User += uint64(i * int(200*cpu))
		s.CPU[0].Idle += uint64(i * int(200*(1-cpu)))
		s.Sockets.Listeners = []evidence.Listener{{Proto: "tcp", Addr: "0.0.0.0:8080", Port: 8080, SendQ: 4096, Established: 50, Unread: unread, PIDs: []int{300}, Process: "python3"}}
		return s
	}
	b := &evidence.Bundle{Host: evidence.Host{Hostname: "web1"}}
	for i := range 6 {
		b.Snapshots = append(b.Snapshots, snap(i))
	}
	s := &app.Server{Role: "front", Kind: "python3", Addr: "0.0.0.0:8080", PIDs: []int{300}}
	for i := range 5 {
		s.Samples = append(s.Samples, app.Sample{Time: start.Add(time.Duration(i)*time.Second + 100*time.Millisecond), Workers: 1, Waits: waits})
	}
	r := &evidence.Run{LoadStart: start, LoadEnd: start.Add(5 * time.Second), Servers: []*app.Server{s}, Port: "8080",
		Load:  &load.Result{Connections: 50, Requests: 400, Status: map[string]uint64{"2xx": 400}, Latency: load.Latency{P50: 620 * time.Millisecond, P99: 700 * time.Millisecond}},
		Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}}}
	return &Input{Run: r}
}

// TestWorkerPoolThreads: a pool no configuration describes, found from
// its threads and its sockets: 4 threads asleep in the request while
// requests wait unread, the CPU idle. The latency decomposes into a 50 ms
// service time and the wait for one of the 4 workers.
func TestWorkerPoolThreads(t *testing.T) {
	fs := checkWorkerPool(pythonPool(map[string]int{app.WaitSleep: 4, app.WaitIdle: 2}, 46, 0.05))
	if len(fs) != 1 || fs[0].ID != WorkerPoolExhausted || fs[0].Subject != "python3 0.0.0.0:8080" || fs[0].Side != report.Server {
		t.Fatalf("findings %+v", fs)
	}
	f := fs[0]
	for _, w := range []string{"4 worker threads busy at most, all 4 of them in 5 of 5 sampled seconds; busy threads were: sleep 100%",
		"up to 46 requests waited unread in their connections to 0.0.0.0:8080, in 6 sampled seconds",
		"service time ≈ 50ms (4.0 busy workers on average / 80 requests/s); responses took p50 620ms = 12 × the service time"} {
		if !hasEvidence(f, w) {
			t.Errorf("no evidence %q in\n%s", w, strings.Join(evidenceTexts(f), "\n"))
		}
	}
	if !strings.Contains(f.Title, "pool of 4 workers") || !strings.HasPrefix(fixOf(f)[0], "raise the pool of python3 on 0.0.0.0:8080 from 4 to 56 workers: 50 requests in flight and 6 spare") {
		t.Errorf("title %q fix %q", f.Title, fixOf(f))
	}
	// One second caught a fifth thread on the CPU (the acceptor): the
	// pool is still the 4 busy in the other seconds, and full.
	in := pythonPool(map[string]int{app.WaitSleep: 4, app.WaitIdle: 2}, 46, 0.05)
	in.Run.Servers[0].Samples[2].Waits = map[string]int{app.WaitSleep: 4, app.WaitRunning: 1, app.WaitIdle: 1}
	if fs := checkWorkerPool(in); len(fs) != 1 || !strings.Contains(fs[0].Title, "pool of 4 workers") ||
		!hasEvidence(fs[0], "4 worker threads busy (5 in one second: a thread passing through) in 5 of 5 sampled seconds") {
		t.Errorf("a thread passing through: %+v", fs)
	}
	// One thread serving every request in turn (http.server without
	// ThreadingMixIn): a pool of one, said as such.
	one := pythonPool(map[string]int{app.WaitSleep: 1, app.WaitIdle: 1}, 6, 0.05)
	one.Run.Load.Requests, one.Run.Load.Latency.P50 = 100, 600*time.Millisecond
	if fs := checkWorkerPool(one); len(fs) != 1 || !strings.Contains(fs[0].Title, "serves one request at a time, on its only worker thread") ||
		!hasEvidence(fs[0], "1 worker thread busy at most, its only one") || !strings.HasPrefix(fixOf(fs[0])[0], "let python3 on 0.0.0.0:8080 serve requests at once") {
		t.Errorf("one thread: %+v", fs)
	}
	// The host's CPU busy with something else (a batch job, a
	// neighbour): the workers' own accounting says they waited off the
	// CPU, 10 % of their time for one; the pool is still full.
	in = pythonPool(map[string]int{app.WaitSleep: 4, app.WaitIdle: 2}, 46, 0.9)
	withCPU(in, 400*time.Millisecond, 20*time.Millisecond)
	if fs := checkWorkerPool(in); len(fs) != 1 ||
		!hasEvidence(fs[0], "the busy workers' time: 90% off the CPU, 10% waiting for a CPU, 0% on one (the process's schedstat): requests waited for a worker, not for CPU; host CPU 90% busy") {
		t.Errorf("a busy host, the workers off the CPU: %+v", fs)
	}
	// Its workers stretched by the wait for a CPU: the CPU's finding.
	waiting := pythonPool(map[string]int{app.WaitSleep: 4, app.WaitIdle: 2}, 46, 0.9)
	withCPU(waiting, 1800*time.Millisecond, 300*time.Millisecond)
	// Quiet: workers on one lock (more would queue there too), on the
	// CPU, requests not waiting, the host's CPU the limit (without the
	// process's accounting, or with it saying the workers waited for a
	// CPU).
	for name, in := range map[string]*Input{
		"file lock":  pythonPool(map[string]int{app.WaitFile: 4, app.WaitIdle: 2}, 46, 0.05),
		"on CPU":     pythonPool(map[string]int{app.WaitRunning: 4, app.WaitIdle: 2}, 46, 0.05),
		"no queue":   pythonPool(map[string]int{app.WaitSleep: 4, app.WaitIdle: 2}, 0, 0.05),
		"busy host":  pythonPool(map[string]int{app.WaitSleep: 4, app.WaitIdle: 2}, 46, 0.9),
		"waiting":    waiting,
		"futex only": pythonPool(map[string]int{app.WaitLock: 4, app.WaitIdle: 2}, 46, 0.05),
	} {
		if fs := checkWorkerPool(in); len(fs) != 0 {
			t.Errorf("%s: %+v", name, keys(fs))
		}
	}
}
