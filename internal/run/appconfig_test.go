package run

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestBacklogFromLoad: the kernel-only rule cannot know that the load
// opens 3000 connections at once; run does, and its advice for the
// overflowing nginx listener is sized as tune plan sizes it (3000,
// doubled, a power of two: 8192) in every line, the sysctl, the reason
// and nginx's listen directive, with nothing left of the rule's 4096.
func TestBacklogFromLoad(t *testing.T) {
	start := time.Unix(1000, 0)
	snap := func(at time.Duration, opens uint64) evidence.Snapshot {
		return evidence.Snapshot{Time: start.Add(at),
			Sysctls:  map[string]string{"net.core.somaxconn": "511"},
			Counters: map[string]uint64{"Tcp.PassiveOpens": opens},
			Sockets: &evidence.Sockets{Listeners: []evidence.Listener{
				{Proto: "tcp", Addr: "10.0.0.1:80", Port: 80, RecvQ: 512, SendQ: 511, PIDs: []int{7}, Process: "nginx"}}}}
	}
	b := &evidence.Bundle{Version: evidence.BundleVersion, Start: start,
		Snapshots: []evidence.Snapshot{snap(0, 0), snap(time.Second, 1000)}}
	r := &Result{LoadStart: start, LoadEnd: start.Add(time.Second),
		Load:  &load.Result{Connections: 3000, Requests: 1000, Latency: load.Latency{P99: 300 * time.Millisecond}},
		Sides: []*Side{{Name: "server", Observed: true, Bundle: b}},
		Servers: []*app.Server{{Kind: "nginx", Addr: "10.0.0.1:80", PIDs: []int{7},
			Nginx: &app.NginxInfo{Listens: []app.NginxListen{{Addr: "10.0.0.1:80", Backlog: -1, Source: "/etc/nginx/nginx.conf:12"}}}}}}
	fs := rules.Run(b, rules.All)
	var f *report.Finding
	for i := range fs {
		if fs[i].ID == "accept-queue-overflow" {
			f = &fs[i]
		}
	}
	if f == nil {
		t.Fatalf("no accept-queue-overflow in %+v", fs)
	}
	if !strings.Contains(strings.Join(f.Fix, "\n"), "to 4096") {
		t.Fatalf("the rule alone, without the load, should propose the default 4096: %q", f.Fix)
	}
	backlogSource(r, f)
	fix := strings.Join(f.Fix, "\n")
	for _, want := range []string{"sysctl -w net.core.somaxconn=8192", "a burst of 3000 connections opened at once and 1000 new connections/s arriving for 300 ms (the load's p99",
		"`listen 10.0.0.1:80 backlog=8192;` at /etc/nginx/nginx.conf:12"} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix lacks %q:\n%s", want, fix)
		}
	}
	if strings.Contains(fix, "=4096") || strings.Contains(fix, "to 4096") || strings.Contains(fix, "backlog=4096") {
		t.Errorf("the rule's load-less 4096 is left in the fix:\n%s", fix)
	}
}
