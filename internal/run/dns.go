package run

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// dnsInPath ties the resolver's probes to the application: when most
// busy workers of a server were seen waiting in name lookups (a UDP
// socket to port 53, polled) while the server's resolver, probed during
// the load, was slow or left reverse lookups unanswered, the lookups are
// in the request path (seed 001 §4–5: a far resolver, a PTR query per
// client). A reverse-lookup hang, latent for a host at rest, is then
// active: it is what requests wait for. relate names it as the cause of
// the full pool or the slow application.
func dnsInPath(r *Result, fs []report.Finding) {
	var who *app.Server
	var pct float64
	for _, s := range r.Servers {
		sh, total := waitShares(loadSamples(s, r))
		if total > 0 && len(sh) > 0 && sh[0].class == app.WaitDNS && 2*sh[0].n >= total {
			who, pct = s, 100*float64(sh[0].n)/float64(total)
		}
	}
	if who == nil {
		return
	}
	side := serverSide(r)
	for i := range fs {
		f := &fs[i]
		if f.Side != side || (f.ID != rules.ReverseDNSLookup && f.ID != rules.DNSSlow) {
			continue
		}
		f.Status = report.Active
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%s workers, sampled each second while busy: %.0f%% waiting in a name lookup (a UDP socket to port 53, polled); requests took p50 %v: these lookups are in the request path",
			who.Kind, pct, r.Load.Latency.P50.Round(1e5)), Source: "wchan", Window: true})
	}
}
