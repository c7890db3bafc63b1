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

// ceilingRun is a 4 s load of 48 connections on a python3 server whose
// port showed, each second, accepted+queued connections (backlog 20),
// its listener's drops rising by drops each second, running of its 4
// threads running.
func ceilingRun(accepted, queued []int, drops uint64, running int) *evidence.Run {
	t0 := time.Unix(1000, 0)
	b := &evidence.Bundle{}
	s := &app.Server{Role: "front", Addr: "10.0.0.1:8080", Kind: "python3", PIDs: []int{10}}
	for i := range accepted {
		at := t0.Add(time.Duration(i) * time.Second)
		b.Snapshots = append(b.Snapshots, evidence.Snapshot{Time: at, Sockets: &evidence.Sockets{Listeners: []evidence.Listener{
			{Proto: "tcp", Addr: "10.0.0.1:8080", Port: 8080, RecvQ: uint32(queued[i]), SendQ: 20, Drops: drops * uint64(i), Established: accepted[i] + queued[i], PIDs: []int{10}},
		}}})
		s.Samples = append(s.Samples, app.Sample{Time: at, Waits: map[string]int{app.WaitRunning: running, app.WaitIdle: 4 - running}})
	}
	return &evidence.Run{Port: "8080", LoadStart: t0, LoadEnd: t0.Add(time.Duration(len(accepted)-1) * time.Second),
		Load:    &load.Result{Connections: 48},
		Sides:   []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}},
		Servers: []*app.Server{s}}
}

func TestConnLimit(t *testing.T) {
	for _, c := range []struct {
		name             string
		accepted, queued []int
		drops            uint64
		running          int
		want             bool
	}{
		{"ceiling", []int{20, 20, 20, 20}, []int{20, 21, 21, 21}, 30, 0, true},
		{"ceiling, queue full, no drops yet", []int{20, 20, 20}, []int{20, 20, 20}, 0, 1, true},
		{"busy threads: too slow, not refusing", []int{20, 20, 20, 20}, []int{20, 21, 21, 21}, 30, 3, false},
		{"no queue", []int{20, 20, 20, 20}, []int{0, 0, 0, 0}, 0, 0, false},
		{"all the load's connections", []int{48, 48, 48}, []int{0, 0, 0}, 0, 0, false},
		{"peak once", []int{12, 20, 15, 14}, []int{21, 21, 21, 21}, 30, 0, false},
		// TestRunConnCeiling's looks in CI, the queue read a moment
		// before the ESTABLISHED sockets while connections arrived
		// (38+2, 41+18: 36 and 23 "accepted"), and a look as the load
		// ended (39+21, 20+21: 18 and -1).
		{"arriving, then full, then ending", []int{36, 20, 18}, []int{2, 21, 21}, 30, 0, true},
		{"arriving, full twice", []int{23, 20, 20, -1}, []int{18, 21, 21, 21}, 7, 0, true},
		{"one over before any waited", []int{21, 20, 20}, []int{0, 2, 21}, 30, 0, true},
		// A server that accepts slowly, its queue full: it climbs, within
		// a tenth, and is no ceiling.
		{"climbing slowly", []int{38, 40, 42}, []int{21, 21, 21}, 30, 0, false},
	} {
		fs := checkConnLimit(&Input{Run: ceilingRun(c.accepted, c.queued, c.drops, c.running)})
		if got := len(fs) == 1 && fs[0].ID == AppConnectionLimit; got != c.want || len(fs) > 1 {
			t.Errorf("%s: got %+v, want a finding: %v", c.name, fs, c.want)
			continue
		}
		if c.want && !strings.Contains(fs[0].Title, "accepts at most 20 connections") {
			t.Errorf("%s: title %q", c.name, fs[0].Title)
		}
	}
}

// At its open-file limit, accept fails with EMFILE: fd-limit's, not the
// application's own ceiling.
func TestConnLimitFDs(t *testing.T) {
	r := ceilingRun([]int{20, 20, 20}, []int{21, 21, 21}, 30, 0)
	b := r.Sides[0].Bundle
	b.Snapshots[1].Processes = []evidence.Process{{PID: 10, OpenFDs: 24, NofileSoft: 24}}
	if fs := checkConnLimit(&Input{Run: r}); len(fs) != 0 {
		t.Fatalf("got %+v", fs)
	}
}

// TestConnLimitBusyOnce: TestRunConnCeiling's single-threaded server ran
// at the last look (closing connections as the load ended) and idled at
// the other two: still the application's own ceiling. Busy at two of
// three looks, it is too slow, not refusing.
func TestConnLimitBusyOnce(t *testing.T) {
	for _, c := range []struct {
		busy []int
		want bool
	}{{[]int{2}, true}, {[]int{0}, true}, {[]int{1, 2}, false}} {
		r := ceilingRun([]int{20, 20, 18}, []int{2, 21, 21}, 30, 0)
		for _, i := range c.busy {
			r.Servers[0].Samples[i].Waits = map[string]int{app.WaitRunning: 4}
		}
		if fs := checkConnLimit(&Input{Run: r}); (len(fs) == 1) != c.want {
			t.Errorf("busy at looks %v: got %+v, want a finding: %v", c.busy, fs, c.want)
		}
	}
}
