package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
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
	in.Run.Sides = append(in.Run.Sides, &Side{RunSide: report.RunSide{Name: report.Client, Observed: true}, Bundle: &client})
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
