package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/load"
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
	return &Input{Run: &Run{LoadStart: start, LoadEnd: start.Add(4 * time.Second), Servers: []*app.Server{s},
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
	if fs[0].Fix[0] != "raise pm.max_children = 4 → 57 in /etc/php/www.conf:7: 50 requests in flight and 6 spare, one for the status page" {
		t.Errorf("fix %q", fs[0].Fix[0])
	}
}
