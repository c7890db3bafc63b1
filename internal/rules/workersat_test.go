package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
)

// TestWorkerSaturated: one nginx worker on CPU all the load on a
// two-CPU host whose other CPU idles, as TestRunSaturatedWorker measured
// it, is named with worker_processes at its line, and app-slow does not
// say the CPU idles; a second kind of server, a Python program's one
// thread, gets the event loop's fix. A worker with CPU to spare, or a
// host with none idle, is not named.
func TestWorkerSaturated(t *testing.T) {
	nginx := func() *app.Server {
		return &app.Server{Role: "front", Kind: "nginx", Addr: "10.0.0.1:443",
			Runtime: &app.Runtime{Name: app.RuntimeNginx, Parallelism: 1, Source: "worker_processes 1 (/etc/nginx/nginx.conf:4)"},
			Nginx:   &app.NginxInfo{WorkerProcesses: app.Setting{Value: 1, Source: "/etc/nginx/nginx.conf:4"}}}
	}
	python := func() *app.Server {
		return &app.Server{Role: "front", Kind: "python3", Addr: "10.0.0.1:8080", Runtime: &app.Runtime{Name: app.RuntimePython}}
	}
	pegged := app.CPU{Span: time.Second, Threads: 1, ThreadTime: time.Second, OnCPU: 960 * time.Millisecond, RunDelay: 20 * time.Millisecond, CPUs: 2, IdleCPUs: 0.8}
	spare := pegged
	spare.OnCPU = 400 * time.Millisecond
	busyHost := pegged
	busyHost.IdleCPUs = 0.1
	running := map[string]int{app.WaitRunning: 1}
	for _, tc := range []struct {
		name  string
		s     *app.Server
		c     app.CPU
		title string
		fix   string
	}{
		{"nginx, one worker", nginx(), pegged, "nginx on 10.0.0.1:443 runs 1 worker, on CPU 96% of the load while the host's CPUs idle 0.8 of 2: requests queue for it (p50 90.00ms)", "worker_processes auto;"},
		{"python, one thread", python(), pegged, "python3 on 10.0.0.1:8080 runs 1 thread, on CPU 96%", "a single-threaded event loop is one CPU at most"},
		{"worker with CPU to spare", nginx(), spare, "", ""},
		{"host without idle CPU", nginx(), busyHost, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := cpuRun(tc.s, tc.c, running)
			fs := checkWorkerSaturated(in)
			if tc.title == "" {
				if len(fs) > 0 {
					t.Fatalf("found: %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 || !strings.HasPrefix(fs[0].Title, tc.title) {
				t.Fatalf("got %+v, want %q", fs, tc.title)
			}
			if fix := fs[0].Actions[0]; !strings.Contains(fix.Note+fix.Config, tc.fix) {
				t.Errorf("fix %+v, want %q", fix, tc.fix)
			}
			all, _ := Diagnose(in.Run)
			for _, f := range all {
				if strings.Contains(f.Title, "CPU idles") {
					t.Errorf("%s: %s", f.ID, f.Title)
				}
			}
		})
	}
}
