package load

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load/loadtest"
)

// TestNginxAccessLogMatches: against a real nginx, a -n run's requests
// are exactly the access log's lines, over reused connections; with
// --no-keepalive every line is its connection's first request.
func TestNginxAccessLogMatches(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		n := loadtest.StartNginx(t, loadtest.NginxConfig{AccessLog: true, KeepaliveRequests: 1000000, CPU: -1})
		res := mustRun(t, Options{Engine: eng, URL: "http://" + n.Addr + "/", Requests: 5000, Connections: 20, Threads: 2, Duration: time.Minute})
		lines := n.AccessLogLines(t, 5000)
		if res.Requests != 5000 || len(lines) != 5000 || res.Status["2xx"] != 5000 {
			t.Fatalf("requests %d, 2xx %d, access log %d lines; want 5000 each", res.Requests, res.Status["2xx"], len(lines))
		}
		conns := map[string]bool{}
		for _, l := range lines {
			// "$status $request_length $body_bytes_sent $connection $connection_requests"
			f := strings.Fields(l)
			if len(f) != 5 || f[0] != "200" {
				t.Fatalf("access log line %q", l)
			}
			conns[f[3]] = true
		}
		if len(conns) != 20 || res.ConnectionsOpened != 20 {
			t.Errorf("nginx saw %d connections, the result %d; want the 20 kept alive", len(conns), res.ConnectionsOpened)
		}
	})
}

func TestNginxNoKeepAlive(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		n := loadtest.StartNginx(t, loadtest.NginxConfig{AccessLog: true, CPU: -1})
		res := mustRun(t, Options{Engine: eng, URL: "http://" + n.Addr + "/", Requests: 500, Connections: 10, Threads: 1, NoKeepAlive: true, Duration: time.Minute})
		lines := n.AccessLogLines(t, 500)
		if res.Requests != 500 || len(lines) != 500 || res.ConnectionsOpened != 500 {
			t.Fatalf("requests %d, access log %d lines, connections %d; want 500 each", res.Requests, len(lines), res.ConnectionsOpened)
		}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) != 5 || f[4] != "1" {
				t.Fatalf("access log line %q: want every request first on its connection", l)
			}
		}
	})
}
