package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// unservedRun is a run of 3 s on a SO_REUSEPORT group of two python3
// processes (one socket each), pid 20's state in every second given.
func unservedRun(states ...string) *evidence.Run {
	t0 := time.Unix(1000, 0)
	s := &app.Server{Role: "front", Addr: "10.0.0.1:8080", Kind: "python3", PIDs: []int{10}}
	for i, st := range states {
		s.Samples = append(s.Samples, app.Sample{Time: t0.Add(time.Duration(i) * time.Second),
			Sockets: []app.Socket{
				{Addr: "10.0.0.1:8080", Inode: 111, Holders: []int{10}, Servers: []int{10}},
				{Addr: "10.0.0.1:8080", Inode: 222, Holders: []int{20}, Servers: []int{20}},
			},
			Procs: []app.ProcState{{PID: 10, Comm: "python3", State: "S"}, {PID: 20, Comm: "python3", State: st, Wchan: map[bool]string{true: "folio_wait_bit_common"}[st == "D"]}}})
	}
	return &evidence.Run{Port: "8080", LoadStart: t0, LoadEnd: t0.Add(time.Duration(len(states)-1) * time.Second), Servers: []*app.Server{s}}
}

func TestUnserved(t *testing.T) {
	for _, c := range []struct {
		name   string
		states []string
		want   string // in the title; "" for no finding
	}{
		{"stopped", []string{"T", "T", "T"}, "python3 pid 20 (stopped) is the only server of listening socket 10.0.0.1:8080 (inode 222)"},
		{"gone", []string{"Z", app.StateGone, app.StateGone}, "python3 pid 20 (gone) is the only server"},
		{"stuck", []string{"D", "D", "D"}, "python3 pid 20 (stuck in folio_wait_bit_common)"},
		{"continued", []string{"T", "T", "S"}, ""},
		{"healthy", []string{"S", "R", "S"}, ""},
		{"one sample", []string{"T"}, ""},
	} {
		fs := checkUnserved(&Input{Run: unservedRun(c.states...)})
		if c.want == "" {
			if len(fs) != 0 {
				t.Errorf("%s: unexpected %+v", c.name, fs)
			}
			continue
		}
		if len(fs) != 1 || fs[0].ID != ListenerUnserved || fs[0].About.PID != 20 || fs[0].Severity != report.Critical {
			t.Fatalf("%s: got %+v", c.name, fs)
		}
		if !strings.Contains(fs[0].Title, c.want) {
			t.Errorf("%s: title %q lacks %q", c.name, fs[0].Title, c.want)
		}
	}
}

// A socket held by every worker but polled by one (nginx's reuseport
// sockets, inherited by all workers) is judged by the one that polls it.
func TestUnservedByEpoll(t *testing.T) {
	r := unservedRun("T", "T")
	for i := range r.Servers[0].Samples {
		smp := &r.Servers[0].Samples[i]
		for j := range smp.Sockets {
			smp.Sockets[j].Holders = []int{10, 20}
			smp.Sockets[j].Seen = true
		}
	}
	if fs := checkUnserved(&Input{Run: r}); len(fs) != 1 || fs[0].About.PID != 20 {
		t.Fatalf("got %+v", fs)
	}
	// Both polling the stopped one's socket: the live one serves it.
	for i := range r.Servers[0].Samples {
		r.Servers[0].Samples[i].Sockets[1].Servers = []int{10, 20}
	}
	if fs := checkUnserved(&Input{Run: r}); len(fs) != 0 {
		t.Fatalf("got %+v", fs)
	}
}
