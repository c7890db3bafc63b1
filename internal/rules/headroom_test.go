package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cgroup"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestHeadroom: a run's resources against their limits, fullest first:
// a thread pool whose every worker was busy while requests waited unread
// is at its limit; a php-fpm pool against pm.max_children; a pool to a
// dependency by its busy share; the accept queue of the served port, the
// conntrack table, the ports towards the busiest destination, the CPUs
// and the servers' descriptors; one CPU entry for two sides of one host.
func TestHeadroom(t *testing.T) {
	unread := func(s *evidence.Snapshot) {
		s.Sockets.Listeners = append(s.Sockets.Listeners, evidence.Listener{Proto: "tcp", Addr: "10.0.0.1:8080", Port: 8080, SendQ: 4096, RecvQ: 3, Unread: 40})
		s.Conntrack.Count = 131072
	}
	b := bundle(unread, func(s *evidence.Snapshot) {
		unread(s)
		s.CPU[0].Idle += 100 // the aggregate (both CPUs): half its ticks busy
		s.CPU[0].User += 100
	})
	b.Host.BootID = "boot-1"
	py := &app.Server{Role: "front", Kind: "python3", Addr: "10.0.0.1:8080", PIDs: []int{300}}
	fpm := &app.Server{Role: "upstream", Kind: "php-fpm", Addr: "127.0.0.1:9000", PIDs: []int{200},
		Pool: &app.PoolInfo{Name: "www", MaxChildren: app.Setting{Value: 8}}}
	for i, at := range []time.Time{t0, t0.Add(time.Second)} {
		py.Samples = append(py.Samples, app.Sample{Time: at, Workers: 1, Waits: map[string]int{app.WaitSleep: 4, app.WaitIdle: 1, app.WaitLock: 1}})
		fpm.Samples = append(fpm.Samples, app.Sample{Time: at, Workers: 8, Waits: map[string]int{app.WaitIdle: 4 + 2*i}})
	}
	py.Deps = []app.Dependency{{Addr: "10.0.0.5:5432", Conns: 10, Busy: 0.5}}
	in := serverRun(b, py, fpm)
	in.Run.Port = "8080"
	client := *b
	in.Run.Sides = append(in.Run.Sides, &evidence.RunSide{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: &client})
	hs := Headroom(in.Run, []report.Finding{{ID: WorkerPoolExhausted, Status: report.Active, Severity: report.Critical, Side: report.Server}})
	got := map[string]report.Headroom{}
	var order []string
	for _, h := range hs {
		got[h.Resource+" "+h.Subject] = h
		order = append(order, h.Resource+" "+h.Subject)
	}
	t.Logf("%s", strings.Join(order, "\n"))
	for _, w := range []struct {
		key   string
		share float64
		text  string
	}{
		{"worker-pool python3 10.0.0.1:8080", 1, "requests waited unread"},
		{"worker-pool php-fpm pool www", 3.0 / 8, "pm.max_children 8"},
		{"dependency-pool python3 → 10.0.0.5:5432", 0.5, "10 connections"},
		{"accept-queue 10.0.0.1:8080", 3.0 / 4096, "backlog of 4096"},
		{"conntrack nf_conntrack server", 0.5, "131072 of nf_conntrack_max 262144"},
		{"ports server → 127.0.0.1:9000", 24.0 / 28232, "24 local ports"},
		{"cpu server's host", 0.5, "50 % busy of 2 CPUs"},
	} {
		h, ok := got[w.key]
		if !ok {
			t.Errorf("no %s", w.key)
			continue
		}
		if d := h.Share - w.share; d > 0.01 || d < -0.01 || !strings.Contains(h.Text, w.text) {
			t.Errorf("%s: share %.3f, %q; want %.3f, %q", w.key, h.Share, h.Text, w.share, w.text)
		}
	}
	if order[0] != "worker-pool python3 10.0.0.1:8080" || !got[order[0]].Active || got["conntrack nf_conntrack server"].Active {
		t.Errorf("fullest first, its finding active: %v", order)
	}
	cpus := 0
	for _, h := range hs {
		if h.Resource == "cpu" {
			cpus++
		}
	}
	if cpus != 1 {
		t.Errorf("%d CPU entries for one host", cpus)
	}
}

// TestHeadroomCPUBound: a Go server whose threads run, or wait for a CPU,
// as many as the CPUs they may use, while requests wait unread, is
// limited by the CPUs, not by a pool of its threads; with a quota tighter
// than its affinity, by the quota; a server whose threads wait on a
// peer keeps its pool.
func TestHeadroomCPUBound(t *testing.T) {
	unread := func(s *evidence.Snapshot) {
		s.Sockets.Listeners = append(s.Sockets.Listeners, evidence.Listener{Proto: "tcp", Addr: "10.0.0.1:8080", Port: 8080, SendQ: 4096, RecvQ: 3, Unread: 40})
	}
	cpuServer := func(on, delay time.Duration, waits map[string]int) *app.Server {
		s := &app.Server{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Runtime: &app.Runtime{Name: app.RuntimeGo}}
		for _, at := range []time.Time{t0, t0.Add(time.Second)} {
			s.Samples = append(s.Samples, app.Sample{Time: at, Workers: 1, Waits: waits,
				CPU: &app.CPU{Span: time.Second, Threads: 6, OnCPU: on, RunDelay: delay, CPUs: 2}})
		}
		return s
	}
	headroomOf := func(s *app.Server) map[string]report.Headroom {
		in := serverRun(bundle(unread, unread), s)
		in.Run.Port = "8080"
		got := map[string]report.Headroom{}
		for _, h := range Headroom(in.Run, nil) {
			got[h.Resource+" "+h.Subject] = h
		}
		return got
	}

	got := headroomOf(cpuServer(1500*time.Millisecond, 500*time.Millisecond, map[string]int{app.WaitRunning: 3}))
	h, ok := got["cpu api 10.0.0.1:8080"]
	if !ok || h.Finding != CPUSaturated || !h.Queued || h.Share < 0.99 || !strings.Contains(h.Text, "ran on 1.50 CPUs and waited for one 0.50 more") {
		t.Errorf("CPU-bound: %+v", got)
	}
	if _, ok := got["worker-pool api 10.0.0.1:8080"]; ok {
		t.Errorf("a pool of threads for the CPUs' limit: %+v", got)
	}
	// The host's CPUs say who took them: the server, and the load
	// generator on the same host (its boot ID).
	in := serverRun(bundle(unread, all(unread, idleCPU(0.9))), cpuServer(1500*time.Millisecond, 500*time.Millisecond, map[string]int{app.WaitRunning: 3}))
	in.Run.Load.Elapsed, in.Run.Load.Self.CPUSeconds = 10*time.Second, 3
	in.Run.Sides[0].Bundle.Host.BootID = "b1"
	in.Run.Sides = append(in.Run.Sides, &evidence.RunSide{SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: &evidence.Bundle{Host: evidence.Host{BootID: "b1"}}})
	host := false
	for _, h := range Headroom(in.Run, nil) {
		if h.Resource == "cpu" && strings.HasSuffix(h.Subject, "host") {
			host = true
			if !strings.Contains(h.Text, "CPUs taken: api 1.50, the load generator 0.30") {
				t.Errorf("host CPUs: %+v", h)
			}
		}
	}
	if !host {
		t.Errorf("no host CPU headroom")
	}

	s := cpuServer(500*time.Millisecond, 900*time.Millisecond, map[string]int{app.WaitRunning: 2})
	s.CGroup = &cgroup.Group{Version: 1, Path: "/api", Limit: &cgroup.Limit{Path: "/api", Quota: 50 * time.Millisecond, Period: 100 * time.Millisecond}}
	if h := headroomOf(s)["cpu api 10.0.0.1:8080"]; h.Limit != 0.5 || !strings.Contains(h.Text, "the quota of /api") {
		t.Errorf("quota: %+v", h)
	}

	got = headroomOf(cpuServer(50*time.Millisecond, 0, map[string]int{app.WaitNetwork: 4, app.WaitIdle: 1}))
	if h, ok := got["worker-pool api 10.0.0.1:8080"]; !ok || h.Finding != WorkerPoolExhausted || !h.Queued {
		t.Errorf("waiting on a peer: %+v", got)
	}
	if _, ok := got["cpu api 10.0.0.1:8080"]; ok {
		t.Errorf("the CPUs blamed for threads that wait on a peer: %+v", got)
	}
}

// TestHeadroomFDsByKind: a server of many processes of one kind (a
// php-fpm pool's children) has one descriptors row, its fullest
// process's, saying how many there are; a process of its own keeps its
// row, and so do processes of one command under another limit.
func TestHeadroomFDsByKind(t *testing.T) {
	procs := func(s *evidence.Snapshot) {
		s.Processes = []evidence.Process{{PID: 100, Comm: "nginx", OpenFDs: 3104, NofileSoft: 20000}, {PID: 200, Comm: "php-fpm8.2", OpenFDs: 10, NofileSoft: 20000}}
		for pid := 201; pid < 251; pid++ {
			s.Processes = append(s.Processes, evidence.Process{PID: pid, Comm: "php-fpm8.2", OpenFDs: 10, NofileSoft: 20000})
		}
		s.Processes = append(s.Processes, evidence.Process{PID: 300, Comm: "php-fpm8.2", OpenFDs: 12, NofileSoft: 1024})
	}
	b := bundle(procs, func(s *evidence.Snapshot) {
		procs(s)
		s.Processes[30].OpenFDs = 465 // pid 229
	})
	fpm := &app.Server{Role: "upstream", Kind: "php-fpm", Addr: "127.0.0.1:9000", Master: 200, PIDs: []int{300}}
	for pid := 201; pid < 251; pid++ {
		fpm.PIDs = append(fpm.PIDs, pid)
	}
	in := serverRun(b, &app.Server{Role: "front", Kind: "nginx", Addr: "0.0.0.0:80", Master: 100}, fpm)
	var rows []string
	for _, h := range Headroom(in.Run, nil) {
		if h.Resource == "fds" {
			rows = append(rows, h.Subject+": "+h.Text)
		}
	}
	want := []string{
		"nginx (pid 100): 3104 open descriptors at most, of its RLIMIT_NOFILE 20000",
		"php-fpm8.2 (pid 229 of 51): 465 open descriptors at most, of its RLIMIT_NOFILE 20000: the fullest of 51 php-fpm8.2 processes",
		"php-fpm8.2 (pid 300): 12 open descriptors at most, of its RLIMIT_NOFILE 1024",
	}
	if strings.Join(rows, "\n") != strings.Join(want, "\n") {
		t.Errorf("fds rows:\n%s\nwant\n%s", strings.Join(rows, "\n"), strings.Join(want, "\n"))
	}
}
