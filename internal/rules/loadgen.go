package rules

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// LoadGeneratorSaturated: the load generator, not the server, may limit
// the numbers. The load's report declares it, as its text names it.
const LoadGeneratorSaturated = report.LoadGeneratorSaturated

var _ = define(Class{ID: LoadGeneratorSaturated,
	Generator: true,
	Errors:    true, Delays: true, Latency: true,
	Meaning:    "the load generator, not the server, is the bottleneck of a benchmark",
	Active:     "an event-loop thread on CPU ≥ 90 % of the run; connections failed for lack of descriptors (`fd-limit`) or local ports (`no-local-port`); `-c` clamped by RLIMIT_NOFILE; with `-R`, under 95 % of the asked rate while threads were ≥ 75 % busy (warning)",
	LatentWhen: "—",
	Seed:       "001 §3 (wrk vs ab)",
	ReportedBy: "`load` (JSON `findings`, and a WARNING in the text)",
	Doc: `Raised by ´netdoctor load´ about itself (´internal/load´, ´engine.judge´), with each reason as an
evidence item: a thread on CPU for 90 % or more of the run (measured with
´CLOCK_THREAD_CPUTIME_ID´ on each event-loop thread), connect failures with EMFILE/ENFILE
(´fd-limit´) or EADDRNOTAVAIL (´no-local-port´), ´-c´ larger than the open-file limit allows (the
run goes on with what fits and says so), and, with ´-R´, an achieved rate under 95 % of the target
while any thread was at least 75 % busy. Severity warning, status active.`,
})

var _ = register(Rule{Name: "loadgen", Order: 170, Scope: PerRun, IDs: []report.FindingID{LoadGeneratorSaturated}, Checks: "the load generator", Check: checkLoadGen})

// checkLoadGen turns the load generator's judgement of itself into a
// finding: its threads were busy, or it ran out of descriptors or local
// ports, so the numbers say more about the client than the server.
func checkLoadGen(in *Input) []report.Finding { return LoadGen(in.Load()) }

// LoadGen is the load generator's judgement of itself as findings, for
// `load --json` as for run.
func LoadGen(res *load.Result) []report.Finding {
	if res == nil || !res.Saturated {
		return nil
	}
	f := report.Finding{ID: LoadGeneratorSaturated, Severity: report.Warning, Status: report.Active, Side: report.Client,
		Title: "The load generator, not the server, may limit these numbers",
		Actions: notes("run with more threads (-t) on more CPUs, or from another host, and compare",
			"raise the generator's open-file limit (ulimit -n) or local port range when those ran out")}
	for _, s := range res.SaturatedBy {
		f.Evidence = append(f.Evidence, report.Item{Text: s, Source: "load", Window: true})
	}
	return []report.Finding{f}
}

// LoadNotes says what the load itself did to the client's side, so that
// a reader tells the load's own connections from the server's: one per
// request as --no-keepalive asks, or kept and reopened, and the local
// ports they took.
func LoadNotes(r *evidence.Run) []string {
	lr := r.Load
	if lr == nil {
		return nil
	}
	var out []string
	switch {
	case !lr.KeepAlive:
		out = append(out, fmt.Sprintf("a new connection per request, as asked with --no-keepalive: %d connections opened", lr.ConnectionsOpened))
	case lr.ConnectionsOpened > uint64(lr.Connections):
		out = append(out, fmt.Sprintf("keep-alive: %d connections, %d opened in all (the server closed or reset %d)", lr.Connections, lr.ConnectionsOpened, lr.ConnectionsOpened-uint64(lr.Connections)))
	default:
		out = append(out, fmt.Sprintf("keep-alive: %d connections opened once and kept", lr.ConnectionsOpened))
	}
	c := r.Client()
	if c == nil || c.Bundle == nil || len(c.Bundle.Snapshots) == 0 {
		return out
	}
	in := &Input{Bundle: r.Window(c), Side: report.Client, Run: r}
	if c.SameAs != "" {
		in.Side = report.Local
	}
	ports, tw := 0, 0
	for _, s := range in.Bundle.Snapshots {
		if s.Sockets == nil {
			continue
		}
		for _, rm := range s.Sockets.Remotes {
			if in.loadsOwn(rm.Addr) && rm.Ephemeral > ports {
				ports, tw = rm.Ephemeral, rm.TimeWait
			}
		}
	}
	if ports == 0 {
		return out
	}
	text := fmt.Sprintf("at most %d local ports of the client in use towards the target (%d in TIME_WAIT)", ports, tw)
	if lo, hi, ok := portRange(&in.Bundle.Snapshots[len(in.Bundle.Snapshots)-1]); ok {
		text += fmt.Sprintf(", of the %d of its range", hi-lo+1)
	}
	return append(out, text)
}
