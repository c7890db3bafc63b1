package rules

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
)

func TestLimiter(t *testing.T) {
	line := `2026/11/28 17:21:10 [error] 28053#28053: *4 limiting requests, excess: 1.000 by zone "one", client: 10.99.243.2, server: , request: "GET / HTTP/1.1"`
	s := &app.Server{Role: "front", Addr: "10.0.0.1:80", Kind: "nginx", Nginx: &app.NginxInfo{Limits: []app.NginxLimit{
		{Directive: "limit_req_zone", Zone: "one", Args: "$binary_remote_addr zone=one:1m rate=10r/s", Source: "/etc/nginx/nginx.conf:18"},
		{Directive: "limit_req", Zone: "one", Args: "zone=one", Source: "/etc/nginx/nginx.conf:19"},
		{Directive: "limit_req", Zone: "other", Args: "zone=other", Source: "/etc/nginx/nginx.conf:30"},
	}}, Logs: []*app.Log{
		{Path: "/var/log/nginx/error.log", Kind: "error", Events: map[string]int{app.EventLimitReq: 2345}, Samples: map[string]string{app.EventLimitReq: line}, Zones: map[string]map[string]int{app.EventLimitReq: {"one": 2345}}},
		{Path: "/var/log/nginx/access.log", Kind: "access", Statuses: map[int]int{503: 2345, 200: 20}},
	}}
	fs := checkLimiter(&Input{Run: &evidence.Run{Servers: []*app.Server{s}}})
	if len(fs) != 1 {
		t.Fatalf("got %+v", fs)
	}
	f := fs[0]
	if want := `nginx's limit_req (zone "one", /etc/nginx/nginx.conf:19) refused or delayed 2345 requests`; f.Title != want {
		t.Errorf("title %q, want %q", f.Title, want)
	}
	var ev []string
	for _, e := range f.Evidence {
		ev = append(ev, e.Text)
	}
	if all := strings.Join(ev, "\n"); !strings.Contains(all, "rate=10r/s (/etc/nginx/nginx.conf:18)") || strings.Contains(all, "zone=other") || !strings.Contains(all, "2345 requests with 503") {
		t.Errorf("evidence:\n%s", all)
	}
	s.Logs[0].Events = nil
	if fs := checkLimiter(&Input{Run: &evidence.Run{Servers: []*app.Server{s}}}); len(fs) != 0 {
		t.Errorf("nothing logged, yet %+v", fs)
	}
}
