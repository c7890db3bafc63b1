package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// testRunNginxLimitReq: nginx's limit_req at 10 requests a second turns
// most of a load of hundreds a second away with 503 and says so in its
// error log: the limiter is named from the log, with its zone and the
// directive's file:line. At a rate and burst far above the load,
// nothing (without a burst, nginx refuses any two requests closer than
// 1/rate, however high the rate).
func testRunNginxLimitReq(t *testing.T) {
	e := newLab(t)
	for i, c := range []struct {
		rate, burst string
		want        bool
	}{{"10r/s", "", true}, {"100000r/s", " burst=10000 nodelay", false}} {
		n := &lab.Nginx{Name: fmt.Sprintf("limited%d", i), Port: 8200 + i, BodyBytes: 64, HTTP: []string{
			"limit_req_zone $binary_remote_addr zone=one:1m rate=" + c.rate + ";",
			"limit_req zone=one" + c.burst + ";",
		}}
		p, err := e.StartNginx(context.Background(), n)
		labMust(t, err)
		_, r, text := runBundle(t, e, fmt.Sprintf("http://%s:%d/", e.ServerIP, n.Port), "-c 8 -d 2s")
		p.Stop()
		t.Logf("verdict %s", r.Verdict)
		var found bool
		for _, f := range r.Findings {
			if f.ID != rules.ServerLimiter {
				continue
			}
			found = true
			t.Logf("%s: %s; %v", f.ID, f.Title, f.Evidence)
			if !strings.Contains(f.Title, `limit_req (zone "one", `) || !strings.Contains(f.Title, "nginx.conf:") {
				t.Errorf("title %q names no zone and file:line", f.Title)
			}
		}
		if found != c.want {
			t.Errorf("rate %s: %s found = %v, want %v\n%s", c.rate, rules.ServerLimiter, found, c.want, text)
			for _, s := range r.Servers {
				for _, l := range s.Logs {
					t.Logf("%s log %s: %+v", s.Kind, l.Path, *l)
				}
				if s.Nginx != nil {
					t.Logf("limits %+v", s.Nginx.Limits)
				}
			}
		}
	}
}
