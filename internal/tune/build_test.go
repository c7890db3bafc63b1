package tune

import (
	"os"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestBuildSeed000 plans from seed 000's report: every kernel and
// configuration change the seed's author made one at a time, each value
// computed from the report, in an order apply can follow.
func TestBuildSeed000(t *testing.T) {
	p, err := Build(readSeed000(t), "seed000.json", seed000Host())
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	p.Text(&text)
	t.Log(text.String())
	srv := Scope{NetNS: "nd-L28171-srv", NetNSInode: 4026532177}
	for _, w := range []struct {
		key, proposed string
		scope         Scope
	}{
		{"sysctl:net.core.somaxconn@", "4096", srv},
		// 999 accepted/s, 984 of them nginx's own to php-fpm, which the
		// plan keeps open: the hash's size is enough.
		{"sysctl:net.netfilter.nf_conntrack_max@", "262144", Scope{Global: true}},
		{"sysctl:net.ipv4.ip_local_port_range@", "10000 65535", srv},
	} {
		c := change(p, w.key)
		if c == nil || c.Sysctl == nil {
			t.Errorf("no %s", w.key)
			continue
		}
		if c.Sysctl.Proposed != w.proposed || c.Sysctl.Scope != w.scope {
			t.Errorf("%s: %s in %+v, want %s in %+v", w.key, c.Sysctl.Proposed, c.Sysctl.Scope, w.proposed, w.scope)
		}
	}
	if c := change(p, "sysctl:net.netfilter.nf_conntrack_buckets"); c != nil {
		t.Errorf("buckets raised though the maximum stays within them: %s", c.Title())
	}
	// What each change was made against, for a verification that cannot
	// see it.
	for _, c := range p.Changes {
		for _, target := range c.Findings {
			if p.Seen[target] == "" {
				t.Errorf("%s: target %s not recorded as seen", c.Key, target)
			}
		}
	}
	if got := p.Seen["conntrack-table-full"]; got != "critical active" {
		t.Errorf("seen conntrack-table-full: %q", got)
	}
	if c := change(p, "sysctl:net.core.somaxconn"); c != nil && c.Sysctl.Current != "10" {
		t.Errorf("somaxconn current %q", c.Sysctl.Current)
	}
	ng := change(p, "file:"+labDir+"/nginx/nginx.conf")
	if ng == nil {
		t.Fatal("no nginx change")
	}
	for _, want := range []string{"+        keepalive 128;\n", "+            fastcgi_keep_conn on;\n"} {
		if !strings.Contains(ng.File.Diff, want) {
			t.Errorf("nginx diff lacks %q:\n%s", want, ng.File.Diff)
		}
	}
	if want := []string{"/usr/sbin/nginx", "-t", "-q", "-p", labDir + "/nginx", "-c", labDir + "/nginx/nginx.conf"}; strings.Join(ng.File.Validate, " ") != strings.Join(want, " ") {
		t.Errorf("nginx validate %q", ng.File.Validate)
	}
	if ng.File.Reload.PID != 28198 || ng.File.Reload.Signal != "HUP" {
		t.Errorf("nginx reload %+v", ng.File.Reload)
	}
	old, _ := os.ReadFile("testdata/seed000-nginx.conf")
	if ng.File.Old != sum(old) || ng.File.New != sum([]byte(ng.File.Content)) {
		t.Errorf("nginx hashes do not match the files")
	}
	fpm := change(p, "file:"+labDir+"/fpm/php-fpm.conf")
	if fpm == nil {
		t.Fatal("no php-fpm change")
	}
	// 200 connections, each pinning a worker with fastcgi_keep_conn, plus
	// an eighth spare and the status page's: 226; static, since dynamic
	// forks 32 a second.
	for _, want := range []string{"+pm.max_children = 226\n", "-pm = dynamic\n", "+pm = static\n"} {
		if !strings.Contains(fpm.File.Diff, want) {
			t.Errorf("php-fpm diff lacks %q:\n%s", want, fpm.File.Diff)
		}
	}
	if fpm.File.Reload.Signal != "USR2" || !strings.HasSuffix(strings.Join(fpm.File.Validate, " "), "-R") {
		t.Errorf("php-fpm validate %q reload %+v", fpm.File.Validate, fpm.File.Reload)
	}
	// The queue that overflowed was php-fpm's, which asks listen() for
	// the limit (-1): no configuration change, but its socket keeps
	// backlog 10 over a reload, as nginx's keeps 10 of its 511 (its
	// backlog unchanged, the reload does not listen() again).
	if strings.Contains(ng.File.Diff, "backlog") || strings.Contains(fpm.File.Diff, "listen.backlog") {
		t.Errorf("a backlog change nobody needs:\n%s\n%s", ng.File.Diff, fpm.File.Diff)
	}
	for _, w := range []struct {
		addr                         string
		pid, asks, current, proposed int
	}{{"127.0.0.1:9000", 28195, -1, 10, 4096}, {"10.99.97.1:80", 28198, 511, 10, 511}} {
		l := change(p, "listen:"+w.addr)
		if l == nil || l.Listen.PID != w.pid || l.Listen.Backlog != w.asks || l.Listen.Current != w.current || l.Listen.Proposed != w.proposed {
			t.Errorf("listener %s: %+v, want %+v", w.addr, l, w)
		}
	}
	// Kernel settings, then files, then listeners.
	rank := map[string]int{KindSysctl: 0, KindFile: 1, KindListen: 2}
	for i := 1; i < len(p.Changes); i++ {
		if rank[p.Changes[i].Kind] < rank[p.Changes[i-1].Kind] {
			t.Errorf("change %d (%s) after a %s", i+1, p.Changes[i].Kind, p.Changes[i-1].Kind)
		}
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "syn-queue-overflow") {
		t.Errorf("notes do not explain the SYN queue: %q", p.Notes)
	}
}

// TestBuildLive: what the host has already, or lacks, is not planned.
func TestBuildLive(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.core.somaxconn"] = "4096"
	delete(h.sysctls, "netns net.ipv4.ip_local_port_range")
	p, err := Build(readSeed000(t), "seed000.json", h)
	if err != nil {
		t.Fatal(err)
	}
	if c := change(p, "sysctl:net.core.somaxconn"); c != nil {
		t.Errorf("somaxconn already 4096, yet: %s", c.Title())
	}
	if c := change(p, "sysctl:net.ipv4.ip_local_port_range"); c != nil {
		t.Errorf("a setting the kernel lacks is planned: %s", c.Title())
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "ip_local_port_range: this kernel") {
		t.Errorf("no note for the missing setting: %q", p.Notes)
	}
	// The php-fpm socket still has backlog 10: somaxconn is 4096 now, so
	// nothing raises it but a listen() again... which needs a somaxconn
	// change to be planned; without one the plan leaves the socket.
	h.sysctls["netns net.core.somaxconn"] = "10"
	h.files = nil
	p, err = Build(readSeed000(t), "seed000.json", h)
	if err != nil {
		t.Fatal(err)
	}
	if c := change(p, "file:"); c != nil {
		t.Errorf("unreadable file planned: %s", c.Title())
	}
	if !strings.Contains(strings.Join(p.Notes, "\n"), "cannot read") {
		t.Errorf("no note for the unreadable file: %q", p.Notes)
	}
}

// TestBuildClientSide: a finding on the load generator's side is for
// that host: a note, and no change here, whatever its fix.
func TestBuildClientSide(t *testing.T) {
	in := pick(t, readSeed000(t), rules.AcceptQueueOverflow)
	in.Findings[0].Side = "client"
	p := build(t, in, seed000Host())
	want := "accept-queue-overflow 127.0.0.1:9000: seen on the client (the load generator), not on the server: tune that host separately"
	if len(p.Changes) != 0 || notes(p) != want {
		t.Errorf("%s, want only the note %q", titles(p), want)
	}
}
