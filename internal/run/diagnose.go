package run

import (
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// Window returns the part of a side's bundle that covers the load: from
// the last snapshot taken before it started to the end of the tail, so
// every counter delta the rules see happened with the load running.
func Window(b *evidence.Bundle, start time.Time) *evidence.Bundle {
	if b == nil {
		return nil
	}
	from := 0
	for i, s := range b.Snapshots {
		if !s.Time.After(start) {
			from = i
		}
	}
	w := *b
	w.Snapshots = b.Snapshots[from:]
	return &w
}

// diagnose runs the rules on each observed side's load window, and adds
// the load generator's judgement of itself.
func diagnose(r *Result) []report.Finding {
	var out []report.Finding
	seen := map[*evidence.Bundle]bool{}
	hosts := map[string]bool{} // hosts whose CPUs were judged
	for _, s := range r.Sides {
		if !s.Observed || seen[s.Bundle] {
			continue
		}
		seen[s.Bundle] = true
		name := s.Name
		if s.Name == report.Server && s.Why == sameNamespace {
			name = report.Local
		}
		var side []report.Finding
		for _, f := range rules.Run(Window(s.Bundle, r.LoadStart), rules.All) {
			if f.ID == rules.AcceptQueueOverflow && f.Status == report.Latent && !r.serves(f.Subject) {
				continue // another service's small backlog is not this run's business
			}
			if f.ID == rules.CPUSaturated {
				// /proc/stat is the host's, whatever the namespace: two
				// sides on one host saw the same CPUs.
				if hosts[s.Bundle.Host.Hostname] {
					continue
				}
				hosts[s.Bundle.Host.Hostname] = true
			}
			f.Side = name
			side = append(side, f)
		}
		baseline(side, s.Bundle, r.LoadStart, name, r.Load)
		out = append(out, side...)
	}
	out = append(out, LoadFindings(r.Load)...)
	for _, s := range r.Sides {
		if s.Observed {
			r.Shape = analyse(r.Load.Timeline, Window(s.Bundle, r.LoadStart))
			break
		}
	}
	tieShape(out, r.Shape)
	for _, s := range r.Sides {
		if s.Name == "client" && s.Observed {
			out = append(out, nagle(r.Load, s.Bundle, r.LoadStart)...)
		}
	}
	// What the applications say: their pools, their upstream
	// connections, the directives behind the kernel's limits.
	out = append(out, workerPool(r)...)
	upstreamChurn(r, &out)
	appConfig(r, &out)
	out = append(out, appSlow(r, out)...)
	dnsInPath(r, out)
	pools := map[string]string{}
	for _, s := range r.Servers {
		if s.Pool != nil {
			pools["php-fpm pool "+s.Pool.Name] = s.Addr
		}
	}
	out = relate(out, pools)
	explain(out, r.Load, r.port)
	return out
}

// LoadFindings turns the load generator's self-judgement into findings.
func LoadFindings(res *load.Result) []report.Finding {
	if res == nil || !res.Saturated {
		return nil
	}
	f := report.Finding{ID: rules.LoadGeneratorSaturated, Severity: report.Warning, Status: report.Active, Side: "client",
		Title: "The load generator, not the server, may limit these numbers",
		Fix: []string{"run with more threads (-t) on more CPUs, or from another host, and compare",
			"raise the generator's open-file limit (ulimit -n) or local port range when those ran out"}}
	for _, s := range res.SaturatedBy {
		f.Evidence = append(f.Evidence, report.Item{Text: s, Source: "load", Window: true})
	}
	return []report.Finding{f}
}

// tieShape adds the throughput's shape as evidence to the findings whose
// counters moved with it: the saw-tooth of seed 002 belongs to the
// conntrack drops that rose in step with each collapse.
func tieShape(fs []report.Finding, sh Shape) {
	if len(sh.MovedWith) == 0 {
		return
	}
	moved := map[string]bool{}
	for _, c := range sh.MovedWith {
		moved[c] = true
	}
	for i := range fs {
		for _, e := range fs[i].Evidence {
			if moved[e.Source] {
				fs[i].Evidence = append(fs[i].Evidence, report.Item{Text: sh.Text, Source: "timeline", Window: true})
				break
			}
		}
	}
}

// serves reports whether a listener address is the run's target port or
// one of the upstreams behind it.
func (r *Result) serves(addr string) bool {
	if strings.HasSuffix(addr, ":"+r.port) {
		return true
	}
	for _, s := range r.Servers {
		if s.Addr == addr {
			return true
		}
	}
	return false
}
