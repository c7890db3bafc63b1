package app

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/nginx"
)

// nginx 1.22's own lines (captured from the lab's limit_req and
// limit_conn) are counted in their classes.
func TestLimiterEvents(t *testing.T) {
	l := &Log{Kind: "error"}
	l.count(strings.NewReader(`2026/11/28 17:21:10 [error] 28053#28053: *4 limiting requests, excess: 1.000 by zone "one", client: 10.99.243.2, server: , request: "GET / HTTP/1.1", host: "10.99.243.1:8200"
2026/11/28 17:21:10 [error] 28053#28053: *9 limiting connections by zone "addr", client: 10.99.243.2, server: , request: "GET / HTTP/1.1", host: "10.99.243.1:8200"
2026/11/28 17:21:10 [error] 28053#28053: *4 limiting requests, excess: 1.000 by zone "one", client: 10.99.243.2, server: , request: "GET / HTTP/1.1"
`))
	if l.Events[EventLimitReq] != 2 || l.Events[EventLimitConn] != 1 {
		t.Fatalf("events %v", l.Events)
	}
	if z, n := Zone([]*Log{l}, EventLimitReq); z != "one" || n != 2 {
		t.Errorf("limit_req zone %q × %d", z, n)
	}
	if z, n := Zone([]*Log{l}, EventLimitConn); z != "addr" || n != 1 {
		t.Errorf("limit_conn zone %q × %d", z, n)
	}
}

func TestNginxLimits(t *testing.T) {
	d := func(name string, line int, args ...string) *nginx.Directive {
		return &nginx.Directive{Name: name, Args: args, File: "/etc/nginx/nginx.conf", Line: line}
	}
	http := d("http", 10)
	srv := d("server", 13)
	srv.Block = []*nginx.Directive{d("limit_req", 14, "zone=one", "burst=5"), d("limit_conn", 15, "addr", "10")}
	http.Block = []*nginx.Directive{d("limit_req_zone", 11, "$binary_remote_addr", "zone=one:10m", "rate=1r/s"), srv}
	got := nginxLimits([]*nginx.Directive{http}, nil)
	want := []NginxLimit{
		{Directive: "limit_req_zone", Zone: "one", Args: "$binary_remote_addr zone=one:10m rate=1r/s", Source: "/etc/nginx/nginx.conf:11"},
		{Directive: "limit_req", Zone: "one", Args: "zone=one burst=5", Source: "/etc/nginx/nginx.conf:14"},
		{Directive: "limit_conn", Zone: "addr", Args: "addr 10", Source: "/etc/nginx/nginx.conf:15"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %+v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
