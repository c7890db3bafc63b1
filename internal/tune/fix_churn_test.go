package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestReuseFastcgi: nginx passing to php-fpm without keepalive gets a
// keepalive pool (200 connections over 2 workers: 128 each, the most)
// and fastcgi_keep_conn next to its fastcgi_pass; the pool then covers
// the connections nginx keeps. The kernel's tcp_tw_reuse is not needed.
func TestReuseFastcgi(t *testing.T) {
	p := build(t, pick(t, readSeed000(t), rules.UpstreamConnectionChurn), seed000Host())
	ng := fileChange(t, p, labDir+"/nginx/nginx.conf")
	for _, want := range []string{
		"     upstream php {\n+        keepalive 128;\n         server 127.0.0.1:9000;\n",
		"             fastcgi_pass php;\n+            fastcgi_keep_conn on;\n",
	} {
		if !strings.Contains(ng.Diff, want) {
			t.Errorf("nginx diff lacks %q:\n%s", want, ng.Diff)
		}
	}
	c := change(p, "file:"+labDir+"/fpm/php-fpm.conf")
	if c == nil || !strings.Contains(c.File.Diff, "+pm.max_children = 226\n") {
		t.Fatalf("the pool is not sized for the kept connections: %s", titles(p))
	}
	if why := strings.Join(c.Why, "\n"); !strings.Contains(why, "with fastcgi_keep_conn a worker stays with its nginx connection") {
		t.Errorf("the pool's reason does not say kept connections pin workers:\n%s", why)
	}
	if c := change(p, "sysctl:net.ipv4.tcp_tw_reuse"); c != nil {
		t.Errorf("nginx keeps the connections, yet: %s", c.Title())
	}
}

// TestReuseProxy: a proxy_pass on HTTP/1.0 with "Connection: close"
// gets HTTP/1.1 and the header cleared, after the pass when its
// settings are nginx's defaults; no php-fpm pool is sized for it.
func TestReuseProxy(t *testing.T) {
	in := pick(t, readSeed000(t), rules.UpstreamConnectionChurn)
	u := &in.Servers[0].Nginx.Upstreams[0]
	u.Pass = "proxy_pass"
	u.Why = `upstream php has no keepalive; proxy_http_version 1.0 (default); no proxy_set_header Connection "" (nginx sends Connection: close)`
	u.KeepConn, u.HTTPVersion, u.ConnectionClose = nil, &app.Param{Value: "1.0", Source: "default"}, true
	p := build(t, in, seed000Host())
	ng := fileChange(t, p, labDir+"/nginx/nginx.conf")
	want := "             fastcgi_pass php;\n+            proxy_http_version 1.1;\n+            proxy_set_header Connection \"\";\n"
	if !strings.Contains(ng.Diff, want) || !strings.Contains(ng.Diff, "+        keepalive 128;\n") {
		t.Errorf("nginx diff lacks keepalive and %q:\n%s", want, ng.Diff)
	}
	if c := change(p, "file:"+labDir+"/fpm/php-fpm.conf"); c != nil {
		t.Errorf("a proxied upstream is not a php-fpm pool, yet: %s", c.Title())
	}
}

// TestReuseNoUpstreamBlock: a pass that names its server directly has
// nowhere to keep connections: the plan says how to get one.
func TestReuseNoUpstreamBlock(t *testing.T) {
	in := pick(t, readSeed000(t), rules.UpstreamConnectionChurn)
	in.Servers[0].Nginx.Upstreams[0].Block = ""
	p := build(t, in, seed000Host())
	want := "upstream-connection-churn 127.0.0.1:9000: fastcgi_pass (" + labDir + "/nginx/nginx.conf:25) names php directly: define an upstream block for it with keepalive and point fastcgi_pass at it"
	if len(p.Changes) != 0 || notes(p) != want {
		t.Errorf("%s, want only the note %q", titles(p), want)
	}
}

// TestTwReuse: connections no nginx makes (an application's own client)
// get the kernel's tcp_tw_reuse, and a note that a pool is the lasting
// fix; where the kernel already reuses ports for them, only the note.
func TestTwReuse(t *testing.T) {
	in := pick(t, readSeed000(t), rules.UpstreamConnectionChurn)
	in.Findings[0].Subject, in.Findings[0].About = "10.99.97.9:6379", report.About{Remotes: []string{"10.99.97.9:6379"}}
	h := seed000Host()
	h.sysctls["netns net.ipv4.tcp_timestamps"] = "0"
	p := build(t, in, h)
	if s := sysctlChange(t, p, "net.ipv4.tcp_tw_reuse"); s.Current != "0" || s.Proposed != "1" {
		t.Errorf("tcp_tw_reuse %s → %s, want 0 → 1", s.Current, s.Proposed)
	}
	for _, want := range []string{
		"upstream-connection-churn 10.99.97.9:6379: tcp_tw_reuse needs tcp_timestamps, which is off (see risky-sysctl)",
		"upstream-connection-churn 10.99.97.9:6379: the lasting fix is a connection pool in the application that connects to 10.99.97.9:6379",
	} {
		if !strings.Contains(notes(p), want) {
			t.Errorf("notes %q lack %q", p.Notes, want)
		}
	}
	h = seed000Host()
	h.sysctls["netns net.ipv4.tcp_tw_reuse"] = "1"
	p = build(t, in, h)
	if len(p.Changes) != 0 || !strings.Contains(notes(p), "the kernel already reuses TIME_WAIT ports for it") {
		t.Errorf("tcp_tw_reuse already 1: %s", titles(p))
	}
}
