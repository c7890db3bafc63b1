package run

import (
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// dnsInPath ties the resolver's probes to the application: when the
// server's workers hold requests waiting on the network while the
// server's resolver, probed during the load, was slow or left reverse
// lookups unanswered, the lookups are in the request path (seed 001
// §4–5: a far resolver, a PTR query per client). A reverse-lookup hang,
// latent for a host at rest, is then active: it is what requests wait
// for. relate names it as app-slow's cause.
func dnsInPath(r *Result, fs []rules.Finding) {
	slow := -1
	for i, f := range fs {
		if f.ID == "app-slow" && f.Status == rules.Active && strings.Contains(strings.Join(f.Fix, " "), waitFix[app.WaitNetwork]) {
			slow = i
		}
	}
	if slow < 0 {
		return
	}
	for i := range fs {
		f := &fs[i]
		if f.Side != fs[slow].Side || (f.ID != "reverse-dns-lookup" && f.ID != "dns-slow") {
			continue
		}
		if f.ID == "reverse-dns-lookup" {
			f.Status = rules.Active
		}
		f.Evidence = append(f.Evidence, rules.Item{Text: "the server's workers wait on the network while requests take " +
			r.Load.Latency.P50.Round(1e5).String() + " (p50) with the CPU idle: these lookups are in the request path", Source: "wchan", Window: true})
	}
}
