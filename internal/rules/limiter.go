package rules

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
)

// ServerLimiter: the server's own rate or connection limiter turned requests away.
const ServerLimiter report.FindingID = "server-limiter"

var _ = define(Class{ID: ServerLimiter,
	Critical: true,
	Errors:   true, Delays: true, Fails: Fails5xx,
	Meaning:    "the server's own limiter (nginx `limit_req`, `limit_conn`) refused or delayed requests, as its error log says: by design, but the load exceeded the rate or connections it allows",
	Active:     "nginx logged \"limiting requests\" (limit_req) or \"limiting connections by zone\" (limit_conn) during the run (critical)",
	LatentWhen: "—",
	Seed:       "nginx limit_req under a load above its rate",
	ReportedBy: "`run`",
	Doc: `Rule ´limiter´ (´limiter.go´). The error logs nginx's configuration names are read for
the lines written during the run (´Log´, as root reads a file another user writes); nginx's own
messages ´limiting requests, excess: … by zone "one"´ (´limit_req´) and ´limiting connections by zone
"addr"´ (´limit_conn´) are counted (event classes ´limit-req´ and ´limit-conn´ of a log's ´events´).
**Active, critical** when either was logged during the run. Title: ´nginx's limit_req (zone "one",
/etc/nginx/nginx.conf:14) refused or delayed 2345 requests´; evidence: the count, a sample line, the
´limit_req´ and ´limit_req_zone´ directives of the zone with their file:line (´limits´ in nginx's
JSON), and the load's 503s. The fix: raise the zone's ´rate=´ or ´burst=´ (´nodelay´), or the
´limit_conn´ number, if the load is legitimate; else it does its job. Tested (TestPaired/RunNginxLimitReq)
with ´limit_req_zone … rate=10r/s´ under a load of hundreds a second; with a rate far above the load,
nothing.`,
})

var _ = register(Rule{Name: "limiter", Order: 188, Scope: PerRun, IDs: []report.FindingID{ServerLimiter}, Checks: "the server's own limiters", Check: checkLimiter})

// checkLimiter finds the requests nginx's own limiters turned away, from
// its error log, and names the directive that set the limit.
func checkLimiter(in *Input) []report.Finding {
	r := in.Run
	if r == nil {
		return nil
	}
	var out []report.Finding
	for _, s := range r.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, c := range []struct{ class, what, directive string }{
			{app.EventLimitReq, "“limiting requests”", "limit_req"},
			{app.EventLimitConn, "“limiting connections”", "limit_conn"},
		} {
			item, n := logItem(s, c.class, c.what)
			if n == 0 {
				continue
			}
			zone, _ := app.Zone(s.Logs, c.class)
			ev := []report.Item{{Text: item, Source: "log", Window: true}}
			where := ""
			for _, l := range s.Nginx.Limits {
				if l.Zone != zone || (l.Directive != c.directive && l.Directive != c.directive+"_zone") {
					continue
				}
				ev = append(ev, report.Item{Text: fmt.Sprintf("%s %s (%s)", l.Directive, l.Args, l.Source), Source: "config"})
				if l.Directive == c.directive && where == "" {
					where = l.Source
				}
			}
			if codes := logStatuses([]*app.Server{s}); codes[503] > 0 {
				ev = append(ev, report.Item{Text: fmt.Sprintf("nginx answered %d requests with 503 during the run (its access log)", codes[503]), Source: "log", Window: true})
			}
			title := fmt.Sprintf("nginx's %s", c.directive)
			if zone != "" {
				title += fmt.Sprintf(" (zone %q", zone)
				if where != "" {
					title += ", " + where
				}
				title += ")"
			}
			title += fmt.Sprintf(" refused or delayed %d requests", n)
			out = append(out, report.Finding{ID: ServerLimiter, Severity: report.Critical, Status: report.Active,
				Subject: "nginx " + c.directive, About: report.About{Server: s.Kind, Listen: s.Addr, Setting: c.directive}, Side: r.ServerSide(),
				Title: title, Evidence: ev,
				Actions: notes(fmt.Sprintf("if the load is legitimate, raise the zone's limit (%s_zone's rate= or %s's burst=/nodelay, limit_conn's number) at %s; else the limiter does its job", c.directive, c.directive, orUnknown(where)),
					"then reload: nginx -s reload")})
		}
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "its directive"
	}
	return s
}
