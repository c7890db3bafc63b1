package tune

import (
	"slices"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/app"
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
// even a listen() again.
func TestBacklogEnough(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.core.somaxconn"] = "4096"
	p := build(t, pick(t, readSeed000(t), rules.AcceptQueueOverflow), h)
	if len(p.Changes) != 0 || len(p.Notes) != 0 {
		t.Errorf("nothing to do, yet %s", titles(p))
	}
}

// TestBacklogUnknownApp: a listener no known application owns gets
// somaxconn and a note saying what to raise by hand.
func TestBacklogUnknownApp(t *testing.T) {
	in := pick(t, readSeed000(t), rules.AcceptQueueOverflow)
	in.Findings[0].Subject, in.Findings[0].About.Listen = "10.99.97.1:8080", "10.99.97.1:8080"
	p := build(t, in, seed000Host())
	sysctlChange(t, p, "net.core.somaxconn")
	want := "accept-queue-overflow 10.99.97.1:8080: the listener's application is unknown: raise its listen() backlog to 4096 and restart it (net.core.somaxconn 10 → 4096 caps it only when it listens)"
	if notes(p) != want {
		t.Errorf("notes %q, want %q", p.Notes, want)
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
