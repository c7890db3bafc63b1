package tune

import (
	"slices"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestBuildNginxBacklog: when nginx's own queue overflowed, its listen
// gets a backlog sized from the load (200 connections at once, doubled,
// a power of two: 512, below the kernel's default somaxconn, so 4096),
// and nginx listens again on reload, so netdoctor does not.
func TestBuildNginxBacklog(t *testing.T) {
	in := readSeed000(t)
	in.Findings[0].Subject, in.Findings[0].About.Listen = "10.99.97.1:80", "10.99.97.1:80"
	p, err := Build(in, "seed000.json", seed000Host())
	if err != nil {
		t.Fatal(err)
	}
	ng := change(p, "file:"+labDir+"/nginx/nginx.conf")
	if ng == nil || !strings.Contains(ng.File.Diff, "-        listen 10.99.97.1:80;\n+        listen 10.99.97.1:80 backlog=4096;\n") {
		t.Fatalf("nginx listen not changed: %+v", ng)
	}
	if c := change(p, "listen:10.99.97.1:80"); c != nil {
		t.Errorf("nginx re-listens on reload, yet: %s", c.Title())
	}
}

// TestBacklogPool: a php-fpm pool that asks listen() for a backlog of
// its own gets it raised with somaxconn, and its socket is listened again
// with the planned backlog, not the one it has.
func TestBacklogPool(t *testing.T) {
	in := pick(t, readSeed000(t), rules.AcceptQueueOverflow)
	in.Servers[1].Pool.Backlog = app.Setting{Value: 128, Source: "default"}
	p := build(t, in, seed000Host())
	if s := sysctlChange(t, p, "net.core.somaxconn"); s.Current != "10" || s.Proposed != "4096" {
		t.Errorf("somaxconn %s → %s, want 10 → 4096", s.Current, s.Proposed)
	}
	fpm := fileChange(t, p, labDir+"/fpm/php-fpm.conf")
	if !strings.Contains(fpm.Diff, " pm.max_children = 5\n+listen.backlog = 4096\n") {
		t.Errorf("listen.backlog not added after pm.max_children:\n%s", fpm.Diff)
	}
	l := change(p, "listen:127.0.0.1:9000")
	if l == nil || l.Listen.Backlog != 4096 || l.Listen.Proposed != 4096 {
		t.Errorf("php-fpm's socket: %+v, want listen() again with the planned backlog 4096", l)
	}
}

// TestBacklogEnough: with somaxconn already at the size the load needs
// and php-fpm asking for the limit, the accept queue needs nothing, not
// even a listen() again, and the plan says why instead of leaving the
// finding out.
func TestBacklogEnough(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.core.somaxconn"] = "4096"
	onlyNote(t, build(t, pick(t, readSeed000(t), rules.AcceptQueueOverflow), h),
		"net.core.somaxconn is already 4096, at least the 4096 the queue needs; php-fpm pool www asks listen() for the limit (listen.backlog = -1)")
}

// TestBacklogUnknownApp: a listener no known application owns gets
// somaxconn and a note saying what to raise by hand.
func TestBacklogUnknownApp(t *testing.T) {
	in := pick(t, readSeed000(t), rules.AcceptQueueOverflow)
	in.Findings[0].Subject, in.Findings[0].About.Listen = "10.99.97.1:8080", "10.99.97.1:8080"
	p := build(t, in, seed000Host())
	sysctlChange(t, p, "net.core.somaxconn")
	want := "accept-queue-overflow 10.99.97.1:8080: not planned, because the listener's application is unknown: look for the backlog the application passes to listen()"
	if !strings.HasPrefix(notes(p), want) || !strings.Contains(notes(p), "set it to 4096") || strings.Contains(notes(p), "4096 → 4096") {
		t.Errorf("notes %q, want %q… set it to 4096", p.Notes, want)
	}
}

// TestSynQueue: with syncookies on, the SYN queue follows the accept
// queue, so its fix is a note; with them off, they are turned on.
func TestSynQueue(t *testing.T) {
	p := build(t, pick(t, readSeed000(t), rules.SynQueueOverflow), seed000Host())
	want := "syn-queue-overflow: the SYN queue follows the listen backlog (see accept-queue-overflow's change); raising net.ipv4.tcp_max_syn_backlog does nothing while syncookies are on. A flood needs rate limiting (nft `ct state new limit rate`) or SYNPROXY"
	if len(p.Changes) != 0 || notes(p) != want {
		t.Errorf("syncookies on: %s, want only the note %q", titles(p), want)
	}
	h := seed000Host()
	h.sysctls["netns net.ipv4.tcp_syncookies"] = "0"
	p = build(t, pick(t, readSeed000(t), rules.SynQueueOverflow), h)
	if s := sysctlChange(t, p, "net.ipv4.tcp_syncookies"); s.Proposed != "1" || s.Global {
		t.Errorf("tcp_syncookies → %s (%s), want 1 in the server's namespace", s.Proposed, s.Scope)
	}
}

// TestListenersWithoutSomaxconn: a socket is listened again only for a
// raised somaxconn; a finding that raises none leaves the sockets.
func TestListenersWithoutSomaxconn(t *testing.T) {
	p := build(t, pick(t, readSeed000(t), rules.ConntrackTableFull), seed000Host())
	if c := change(p, "listen:"); c != nil {
		t.Errorf("no somaxconn change, yet: %s", c.Title())
	}
	p = build(t, pick(t, readSeed000(t), rules.RiskySysctl), seed000Host())
	if c := change(p, "listen:127.0.0.1:9000"); c == nil || !slices.Equal(c.Findings, []string{"risky-sysctl net.core.somaxconn"}) {
		t.Errorf("somaxconn raised for risky-sysctl: listener %+v, want it listened again for that finding", c)
	}
}

// genericListener is a check report of one listener that neither nginx
// nor php-fpm owns, overflowing: its finding as the rule makes it (a
// listen action sized 4096), the listener with the backlog it listened
// with, and a host with somaxconn and the owner process.
func genericListener(comm string, rt app.RuntimeName, backlog uint32, somaxconn string) (*Input, *recorded) {
	in := &Input{Report: &report.Report{Version: report.Version, Command: "check",
		Findings: []report.Finding{{ID: rules.AcceptQueueOverflow, Severity: report.Critical, Status: report.Active,
			Subject: "127.0.0.1:8000", About: report.About{Listen: "127.0.0.1:8000"},
			Actions: []report.Action{report.Relisten(comm, "127.0.0.1:8000", []int{4242}, 4096, "raise the listen() backlog")}}},
		Summary: report.Summary{
			Listeners: []evidence.Listener{{Proto: "tcp", Addr: "127.0.0.1:8000", Port: 8000, SendQ: backlog, PIDs: []int{4242}, Process: comm}},
			Sysctls:   map[string]string{"net.core.somaxconn": somaxconn}}}}
	h := &recorded{sysctls: map[string]string{"netns net.core.somaxconn": somaxconn},
		procs: map[int]Proc{4242: {Exe: "/usr/bin/" + comm, Comm: comm, Start: 7, Runtime: rt}}}
	return in, h
}

// TestBacklogPython: a python3 server's overflowing queue is never left
// out of the plan. With somaxconn already 4096 nothing is proposed for
// the kernel ("4096 → 4096" would change nothing); the note names
// Python's own backlog setting, never nginx's or php-fpm's.
func TestBacklogPython(t *testing.T) {
	in, h := genericListener("python3", app.RuntimePython, 5, "4096")
	p := build(t, in, h)
	onlyNote(t, p, "raise python3's (pid 4242) listen() backlog from 5 to 4096 — Python: socketserver's (and http.server's) `request_queue_size = 4096`")
	for _, bad := range []string{"4096 → 4096", "nginx `listen", "listen.backlog"} {
		if strings.Contains(notes(p), bad) {
			t.Errorf("note says %q: %s", bad, notes(p))
		}
	}
	// A kernel that caps the backlog asked for gets somaxconn too.
	in, h = genericListener("python3", app.RuntimePython, 5, "1024")
	p = build(t, in, h)
	if s := sysctlChange(t, p, "net.core.somaxconn"); s.Current != "1024" || s.Proposed != "4096" {
		t.Errorf("somaxconn %s → %s, want 1024 → 4096", s.Current, s.Proposed)
	}
	if !strings.Contains(notes(p), "request_queue_size = 4096") || !strings.Contains(notes(p), "with net.core.somaxconn raised to 4096 above") {
		t.Errorf("notes %q", p.Notes)
	}
}

// TestBacklogGo: a Go server asks listen() for somaxconn itself, so the
// kernel's setting is its knob: raised when it capped the queue, and a
// restart in every case, since Go reads it once.
func TestBacklogGo(t *testing.T) {
	in, h := genericListener("api-server", app.RuntimeGo, 128, "128")
	p := build(t, in, h)
	if s := sysctlChange(t, p, "net.core.somaxconn"); s.Proposed != "4096" {
		t.Errorf("somaxconn → %s, want 4096", s.Proposed)
	}
	if n := notes(p); !strings.Contains(n, "is a Go program, whose net.Listen asks listen() for net.core.somaxconn") || !strings.Contains(n, "restart it once net.core.somaxconn is raised to 4096 above") {
		t.Errorf("notes %q", p.Notes)
	}
	in, h = genericListener("api-server", app.RuntimeGo, 128, "4096")
	onlyNote(t, build(t, in, h), "the socket has 128): restart it: net.core.somaxconn is 4096 now")
}

// TestBacklogAlreadyLarge: a queue already as large as the arrivals need
// and still full is an application that accepts too slowly: the plan
// says so rather than raise anything.
func TestBacklogAlreadyLarge(t *testing.T) {
	in, h := genericListener("java", app.RuntimeJava, 4096, "4096")
	onlyNote(t, build(t, in, h), "its accept queue is already 4096, what the arrivals need: the application accepts too slowly")
}
