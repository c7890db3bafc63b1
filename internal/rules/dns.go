package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Findings of this file.
const (
	DNSMisconfigured report.FindingID = "dns-misconfigured"  // no nameserver answers: name lookups fail
	DNSSlow          report.FindingID = "dns-slow"           // name lookups are slow or lost
	ReverseDNSLookup report.FindingID = "reverse-dns-lookup" // reverse (PTR) lookups hang
)

// slowDNS is the lookup time above which every uncached name costs a
// request noticeable latency; a cache on the host answers in under 1 ms.
const slowDNS = 100 * time.Millisecond

// checkDNS finds a resolver configuration that cannot work (seed 001 §4:
// an empty resolv.conf), nameservers that do not answer or answer slowly,
// and reverse lookups that hang (§5: ping took 11 s on unanswered PTRs).
func checkDNS(in *Input) []report.Finding {
	out := resolverFindings(in.Bundle)
	if in.ServerSide() {
		inPath(in, out)
	}
	return out
}

// resolverFindings judges the resolver's configuration and probes.
func resolverFindings(b *evidence.Bundle) []report.Finding {
	var r *evidence.Resolver
	for i := range b.Snapshots {
		if s := b.Snapshots[i].Resolver; s != nil && (r == nil || len(s.Probes) > 0) {
			r = s
		}
	}
	if r == nil {
		return nil
	}
	conf := report.Item{Text: fmt.Sprintf("%s: nameservers %v", r.ConfPath, r.Nameservers), Source: "resolver"}
	if len(r.Nameservers) == 0 {
		return []report.Finding{{ID: DNSMisconfigured, Severity: report.Critical, Status: report.Active,
			Title:    "No nameserver configured: every name lookup fails",
			Evidence: []report.Item{{Text: r.ConfPath + " lists no nameserver", Source: "resolver", Window: true}},
			Fix:      []string{"add `nameserver <address>` to " + r.ConfPath + " (a local cache such as dnsmasq or systemd-resolved answers repeated names in under 1 ms)"}}}
	}
	if len(r.Probes) == 0 {
		return nil
	}
	var out []report.Finding
	aOK, aFail := 0, 0
	var failItems, slowItems, ptrItems []report.Item
	for _, p := range r.Probes {
		it := report.Item{Text: probeText(p), Source: "resolver", Window: true}
		switch {
		case p.Type == "PTR" && (p.Err != "" || p.Duration >= slowDNS):
			ptrItems = append(ptrItems, it)
		case p.Type == "A" && (p.Err != "" || p.Rcode == "SERVFAIL" || p.Rcode == "REFUSED"):
			aFail++
			failItems = append(failItems, it)
		case p.Type == "A" && p.Duration >= slowDNS:
			aOK++
			slowItems = append(slowItems, it)
		case p.Type == "A":
			aOK++
		}
	}
	if aOK == 0 && aFail > 0 {
		out = append(out, report.Finding{ID: DNSMisconfigured, Severity: report.Critical, Status: report.Active,
			Title:    "No configured nameserver answers: name lookups fail",
			Evidence: append(failItems, conf),
			Fix:      []string{"point " + r.ConfPath + " at a reachable resolver, or run a local cache (dnsmasq) that forwards to one"}})
	} else if aFail > 0 {
		slowItems = append(slowItems, failItems...)
	}
	if len(slowItems) > 0 {
		out = append(out, report.Finding{ID: DNSSlow, Severity: report.Warning, Status: report.Active,
			Title:    "Name lookups are slow or fail on some nameservers: each uncached lookup adds this delay (glibc waits 5 s per unanswered try)",
			Evidence: append(slowItems, conf),
			Fix: []string{
				"run a local cache (dnsmasq, systemd-resolved, nscd) so repeated names cost under 1 ms",
				"list the nearest, healthy resolver first in " + r.ConfPath + "; `options timeout:1 attempts:2 rotate` bounds the stall",
			}})
	}
	if len(ptrItems) > 0 {
		out = append(out, report.Finding{ID: ReverseDNSLookup, Severity: report.Warning, Status: report.Latent,
			Title:    "Reverse (PTR) lookups hang: any program that resolves client addresses (logging, access control, ping, ssh) stalls per connection",
			Evidence: ptrItems,
			Fix: []string{
				"turn off reverse lookups in the hot path: nginx has none by default; Apache `HostnameLookups Off`; sshd `UseDNS no`; use `ping -n`, `ss -n`, `netstat -n`",
				"make the resolver answer PTR for private ranges locally (dnsmasq `bogus-priv`, unbound `local-zone`)",
			}})
	}
	return out
}

func probeText(p evidence.DNSProbe) string {
	res := p.Rcode
	if p.Err != "" {
		res = p.Err
	}
	return fmt.Sprintf("%s %s query for %s: %s after %s", p.Server, p.Type, p.Name, res, p.Duration.Round(time.Millisecond))
}

// inPath ties the resolver's probes to the application: when most
// busy workers of a server were seen waiting in name lookups (a UDP
// socket to port 53, polled) while the server's resolver, probed during
// the load, was slow or left reverse lookups unanswered, the lookups are
// in the request path (seed 001 §4–5: a far resolver, a PTR query per
// client). A reverse-lookup hang, latent for a host at rest, is then
// active: it is what requests wait for. relate names it as the cause of
// the full pool or the slow application.
func inPath(in *Input, fs []report.Finding) {
	r := in.Run
	var who *app.Server
	var pct float64
	for _, s := range r.Servers {
		sh, total := waitShares(r.Samples(s))
		if total > 0 && len(sh) > 0 && sh[0].class == app.WaitDNS && 2*sh[0].n >= total {
			who, pct = s, 100*float64(sh[0].n)/float64(total)
		}
	}
	if who == nil {
		return
	}
	for i := range fs {
		f := &fs[i]
		if f.ID != ReverseDNSLookup && f.ID != DNSSlow {
			continue
		}
		f.Status = report.Active
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%s workers, sampled each second while busy: %.0f%% waiting in a name lookup (a UDP socket to port 53, polled); requests took p50 %v: these lookups are in the request path",
			who.Kind, pct, r.Load.Latency.P50.Round(1e5)), Source: "wchan", Window: true})
	}
}
