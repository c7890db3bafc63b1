package rules

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
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

var _ = define(Class{ID: DNSMisconfigured,
	Critical:   true,
	Errors:     true,
	Meaning:    "name lookups cannot work: no nameserver configured, or none answers",
	Active:     "resolv.conf lists no nameserver, or every A probe failed (critical)",
	LatentWhen: "none",
	Seed:       "001 §4",
	ReportedBy: "`check`, `diagnose`",
})

var _ = define(Class{ID: DNSSlow,
	Delays: true, Holds: true,
	Consequences: []Consequence{{Effect: WorkersFull}, {Effect: TimeHeld}},
	Meaning:      "lookups answer, but slowly or only from some nameservers",
	Active:       "an A probe took ≥ 100 ms, or some A probes failed while others answered (warning)",
	LatentWhen:   "none",
	Seed:         "001 §4",
	ReportedBy:   "`check`, `diagnose`",
})

var _ = define(Class{ID: ReverseDNSLookup,
	Latent: true,
	Delays: true, Holds: true,
	Consequences: []Consequence{{Effect: WorkersFull}, {Effect: TimeHeld}},
	Meaning:      "reverse (PTR) lookups hang; anything that resolves client addresses stalls per connection",
	Active:       "none",
	LatentWhen:   "a PTR probe failed or took ≥ 100 ms (warning)",
	Seed:         "001 §5",
	ReportedBy:   "`check`, `diagnose`",
})

var _ = register(Rule{Name: "dns", Order: 90, Scope: PerSide, IDs: []report.FindingID{DNSMisconfigured, DNSSlow, ReverseDNSLookup}, Checks: "name lookups", Check: checkDNS,
	Doc: `Rule ´dns´ (´dns.go´). It reads the resolver configuration (´/etc/resolv.conf´, or
´/etc/netns/NS/resolv.conf´) and the probes that ´collect´ and ´check´ send straight to each nameserver:
an A query for the host name (or the name given) and a PTR query for the namespace's first non-loopback
IPv4 address. It uses the last snapshot that has probes, or else the first snapshot with a resolver
configuration. An A probe has failed when it carries an error (´timeout´, ´connection refused´…) or
the answer is SERVFAIL or REFUSED; NXDOMAIN is an answer (the server works, the name does not exist).
"Slow" means 100 ms or more.

´check´ sends each nameserver 10 A queries, ´run´ 40 during the load's first seconds (with ´--dns´, or by itself as soon as the server's workers are seen waiting in a lookup), a few
milliseconds apart, so that a lossy resolver shows its loss rate and the latency of its answers: ´10.0.0.2:
13 of 20 A queries for web1 answered, 7 lost (35%: no answer within 2s); answers took p50 1ms, max 3ms´.

- ´dns-misconfigured´, **active, critical**:
  - the configuration lists no nameserver (´/etc/resolv.conf lists no nameserver´), which is decided
    from the configuration alone, even with one snapshot and no probes; or
  - no query at all was answered, A or PTR: every nameserver is down or unreachable. The evidence is
    each probe, as in ´10.0.0.2 A query for web1: timeout after 2s´, plus ´/etc/resolv.conf:
    nameservers [10.0.0.2]´. A resolver that answers some queries (a PTR, a share of the As) is not
    misconfigured: it loses the others.
- ´dns-slow´, **active, warning**: some A queries answered after 100 ms or more (the median, when
  repeated), or some were lost or failed while others were answered. The evidence is the slow and the
  failed ones, plus the configuration. With lost queries the title gives the loss rate, and an item
  says what glibc makes of it: each lost query stalls a lookup ´timeout´ seconds (5 by default,
  ´options timeout:N´) before the next try, and a lookup fails when every try of every ´attempts´ (2)
  to every nameserver is lost: ´with 35% of queries lost, about 35% of uncached lookups stall 5 s
  before their next try and 12% fail after 10 s´.
- In a run, when the workers of a server behind the port spent a third or more of their busy time
  polling a socket connected to port 53 (UDP, or TCP), name lookups are in the request path: a
  ´dns-slow´ or ´reverse-dns-lookup´ finding becomes active with that share as evidence, and when
  neither was raised (the resolver was not probed, or answered the probes well) ´dns-slow´ is raised
  from the workers' waits alone, with how to measure the resolver. This works for any process that
  resolves through glibc or a resolver of its own on port 53.
- ´reverse-dns-lookup´, **latent, warning**: any PTR probe failed or took 100 ms or more, as in
  ´10.0.0.2 PTR query for 10.77.0.1: timeout after 2s´. glibc waits 5 s per try. A lost PTR
  query from a resolver that loses a share of its A queries too is that loss, and goes to
  ´dns-slow´'s evidence instead: only PTR queries answered slowly, or lost where A queries are
  not, are reverse lookups that hang.

If probing is off there are no probes, and only an empty configuration is reported.`})

// slowDNS is the lookup time above which every uncached name costs a
// request noticeable latency; a cache on the host answers in under 1 ms.
const slowDNS = 100 * time.Millisecond

// checkDNS finds a resolver configuration that cannot work (seed 001 §4:
// an empty resolv.conf), nameservers that do not answer or answer slowly,
// and reverse lookups that hang (§5: ping took 11 s on unanswered PTRs).
func checkDNS(in *Input) []report.Finding {
	out := resolverFindings(in.Bundle)
	if in.ServerSide() {
		out = inPath(in, out)
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
			Actions:  notes("add `nameserver <address>` to " + r.ConfPath + " (a local cache such as dnsmasq or systemd-resolved answers repeated names in under 1 ms)")}}
	}
	if len(r.Probes) == 0 {
		return nil
	}
	var out []report.Finding
	aOK, aFail, ptrAnswered := 0, 0, false
	var failItems, slowItems, ptrItems []report.Item
	var lost, sent int
	for _, g := range byServer(r.Probes, "A") {
		if len(g) > 1 {
			ok, l, it := aggregate(g)
			sent += len(g)
			lost += l
			switch {
			case ok == 0:
				aFail++
				failItems = append(failItems, it)
			case ok < len(g) || percentile(g, 0.5) >= slowDNS:
				aOK++
				slowItems = append(slowItems, it)
			default:
				aOK++
			}
			continue
		}
		p := g[0]
		it := report.Item{Text: probeText(p), Source: "resolver", Window: true}
		switch {
		case p.Err != "" || p.Rcode == "SERVFAIL" || p.Rcode == "REFUSED":
			aFail++
			failItems = append(failItems, it)
		case p.Duration >= slowDNS:
			aOK++
			slowItems = append(slowItems, it)
		default:
			aOK++
		}
	}
	ptrLostOnly := true // every PTR item is a lost query, none a slow answer
	for _, p := range r.Probes {
		if p.Type != "PTR" {
			continue
		}
		ptrAnswered = ptrAnswered || p.Rcode != ""
		if p.Err != "" || p.Duration >= slowDNS {
			ptrItems = append(ptrItems, report.Item{Text: probeText(p), Source: "resolver", Window: true})
			ptrLostOnly = ptrLostOnly && p.Err != ""
		}
	}
	// A resolver that loses a share of every query loses PTR queries too:
	// that is its loss (dns-slow), not reverse lookups that hang. Only
	// PTR queries failing where A queries do not, or answered slowly,
	// are a PTR problem of their own.
	if len(ptrItems) > 0 && ptrLostOnly && lost > 0 && aOK > 0 {
		slowItems = append(slowItems, ptrItems...)
		ptrItems = nil
	}
	// Only a resolver that answers nothing, not even a reverse lookup,
	// is misconfigured; one that answers some queries loses the others.
	if aOK == 0 && aFail > 0 && !ptrAnswered {
		out = append(out, report.Finding{ID: DNSMisconfigured, Severity: report.Critical, Status: report.Active,
			Title:    "No configured nameserver answers: name lookups fail",
			Evidence: append(failItems, conf),
			Actions:  notes("point " + r.ConfPath + " at a reachable resolver, or run a local cache (dnsmasq) that forwards to one")})
	} else if aFail > 0 {
		slowItems = append(slowItems, failItems...)
	}
	if len(slowItems) > 0 {
		f := report.Finding{ID: DNSSlow, Severity: report.Warning, Status: report.Active,
			Title:    "Name lookups are slow or fail on some nameservers: each uncached lookup adds this delay (glibc waits 5 s per unanswered try)",
			Evidence: append(slowItems, conf),
			Actions: notes(
				"run a local cache (dnsmasq, systemd-resolved, nscd) so repeated names cost under 1 ms",
				"list the nearest, healthy resolver first in "+r.ConfPath+"; `options timeout:1 attempts:2 rotate` bounds the stall",
			)}
		if lost > 0 && sent > 0 {
			loss := float64(lost) / float64(sent)
			timeout, attempts := resolverOptions(r.Options)
			f.Title = fmt.Sprintf("The resolver loses %.0f%% of queries: each lost one stalls a name lookup %d s (glibc's timeout)", 100*loss, timeout)
			f.Evidence = append(f.Evidence, report.Item{Text: stallText(loss, timeout, attempts, len(r.Nameservers), r.Options), Source: "resolver"})
			f.Actions = append(f.Actions, report.Advise("find where the queries are lost: the resolver's own capacity and rate limits, a firewall or conntrack table on the way (`nstat -az Udp`, `conntrack -S` on the resolver's host)"))
		}
		out = append(out, f)
	}
	if len(ptrItems) > 0 {
		out = append(out, report.Finding{ID: ReverseDNSLookup, Severity: report.Warning, Status: report.Latent,
			Title:    "Reverse (PTR) lookups hang: any program that resolves client addresses (logging, access control, ping, ssh) stalls per connection",
			Evidence: ptrItems,
			Actions: notes(
				"turn off reverse lookups in the hot path: nginx has none by default; Apache `HostnameLookups Off`; sshd `UseDNS no`; use `ping -n`, `ss -n`, `netstat -n`",
				"make the resolver answer PTR for private ranges locally (dnsmasq `bogus-priv`, unbound `local-zone`)",
			)})
	}
	return out
}

// byServer groups the probes of one type by nameserver, in order.
func byServer(probes []evidence.DNSProbe, typ string) [][]evidence.DNSProbe {
	var out [][]evidence.DNSProbe
	at := map[string]int{}
	for _, p := range probes {
		if p.Type != typ {
			continue
		}
		i, ok := at[p.Server]
		if !ok {
			i = len(out)
			at[p.Server] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}

// aggregate sums up repeated queries to one nameserver: how many were
// answered, how many got no answer in time (lost), and the evidence.
func aggregate(g []evidence.DNSProbe) (answered, lost int, it report.Item) {
	failed := 0
	for _, p := range g {
		switch {
		case p.Err == resolverTimeout:
			lost++
		case p.Err != "" || p.Rcode == "SERVFAIL" || p.Rcode == "REFUSED":
			failed++
		default:
			answered++
		}
	}
	text := fmt.Sprintf("%s: %d of %d %s queries for %s answered", g[0].Server, answered, len(g), g[0].Type, g[0].Name)
	if lost > 0 {
		text += fmt.Sprintf(", %d lost (%.0f%%: no answer within %s)", lost, 100*float64(lost)/float64(len(g)), maxDuration(g).Round(100*time.Millisecond))
	}
	if failed > 0 {
		text += fmt.Sprintf(", %d failed", failed)
	}
	if answered > 0 {
		text += fmt.Sprintf("; answers took p50 %s, max %s", roundDNS(percentile(g, 0.5)), roundDNS(percentile(g, 1)))
	}
	return answered, lost, report.Item{Text: text, Source: "resolver", Window: true}
}

// roundDNS rounds a duration for reading: to the microsecond below a
// millisecond, to a tenth of one above.
func roundDNS(d time.Duration) time.Duration {
	if d < time.Millisecond {
		return d.Round(time.Microsecond)
	}
	return d.Round(time.Millisecond / 10)
}

// resolverTimeout is a probe's error for a query nobody answered.
const resolverTimeout = "timeout"

// percentile is the q-th quantile of the answered queries' durations.
func percentile(g []evidence.DNSProbe, q float64) time.Duration {
	var ds []time.Duration
	for _, p := range g {
		if p.Err == "" {
			ds = append(ds, p.Duration)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}

func maxDuration(g []evidence.DNSProbe) time.Duration {
	var m time.Duration
	for _, p := range g {
		m = max(m, p.Duration)
	}
	return m
}

// resolverOptions are glibc's timeout (seconds) and attempts as
// resolv.conf's options set them, else its defaults (RES_TIMEOUT 5,
// RES_DFLRETRY 2).
func resolverOptions(opts []string) (timeout, attempts int) {
	timeout, attempts = 5, 2
	for _, o := range opts {
		k, v, _ := strings.Cut(o, ":")
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			continue
		}
		switch k {
		case "timeout":
			timeout = min(n, 30) // glibc's RES_MAXRETRANS cap
		case "attempts":
			attempts = min(n, 5) // RES_MAXRETRY
		}
	}
	return timeout, attempts
}

// stallText says what a loss rate costs an application that resolves
// through glibc: each lost query waits the timeout before the next try,
// and a lookup fails when every try of every attempt to every nameserver
// is lost.
func stallText(loss float64, timeout, attempts, servers int, opts []string) string {
	set := "glibc's defaults"
	if len(opts) > 0 {
		set = "options " + strings.Join(opts, " ")
	}
	tries := attempts * max(servers, 1)
	return fmt.Sprintf("with %.0f%% of queries lost, about %.0f%% of uncached lookups stall %d s before their next try and %.2g%% fail after %d s (timeout %d s, attempts %d, %d nameserver(s): %s)",
		100*loss, 100*loss, timeout, 100*math.Pow(loss, float64(tries)), tries*timeout, timeout, attempts, servers, set)
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
func inPath(in *Input, fs []report.Finding) []report.Finding {
	r := in.Run
	var who *app.Server
	var pct float64
	// Lookups the busy workers mostly wait on are in the request path;
	// in a slow run a third of their time is enough to decide its
	// latency. A fast run's lookups (a local cache) can be caught in
	// flight by the samples without costing anything.
	slow := slowLoad(r.Load)
	for _, s := range r.Servers {
		sh, total := waitShares(r.Samples(s))
		for _, x := range sh {
			if x.class == app.WaitDNS && x.n >= 3 && (2*x.n >= total || slow && 3*x.n >= total) {
				who, pct = s, 100*float64(x.n)/float64(total)
			}
		}
	}
	if who == nil {
		return fs
	}
	took := fmt.Sprintf("p50 %v", r.Load.Latency.P50.Round(1e5))
	if slow && r.Load.Latency.P99 >= 10*r.Load.Latency.P50 {
		took += fmt.Sprintf(", p99 %v", r.Load.Latency.P99.Round(time.Millisecond))
	}
	item := report.Item{Text: fmt.Sprintf("%s workers, sampled each second while busy: %.0f%% waiting in a name lookup (a socket to port 53, polled); requests took %s: these lookups are in the request path",
		who.Kind, pct, took), Source: "wchan", Window: true}
	named := false
	for i := range fs {
		f := &fs[i]
		if f.ID != ReverseDNSLookup && f.ID != DNSSlow {
			continue
		}
		named = true
		f.Status = report.Active
		f.Evidence = append(f.Evidence, item)
		if slow {
			// What the requests wait for in a slow run is what hurts.
			f.Severity = report.Critical
		}
	}
	if named || !slow {
		return fs
	}
	// The resolver was not probed (or answered the probes well), yet the
	// workers wait on it: the lookups are slow for the application.
	conf := "resolv.conf"
	for _, s := range in.Bundle.Snapshots {
		if s.Resolver != nil {
			conf = s.Resolver.ConfPath
		}
	}
	return append(fs, report.Finding{ID: DNSSlow, Severity: report.Warning, Status: report.Active,
		Title:    fmt.Sprintf("%s waits on name lookups in the request path (%.0f%% of its busy workers' time)", who.Kind, pct),
		Evidence: []report.Item{item},
		Actions: notes(
			"measure the resolver: `netdoctor run --dns …` or `netdoctor check` probe each nameserver of "+conf+" repeatedly (loss, latency)",
			"run a local cache (dnsmasq, systemd-resolved, nscd) so repeated names cost under 1 ms, and resolve backends once at start rather than per request",
			"`options timeout:1 attempts:2 rotate` in "+conf+" bounds what one lost query costs (5 s by default)",
		)})
}
