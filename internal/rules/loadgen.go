package rules

import (
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// LoadGeneratorSaturated: the load generator, not the server, may limit
// the numbers. The load's report declares it, as its text names it.
const LoadGeneratorSaturated = report.LoadGeneratorSaturated

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
		Fix: []string{"run with more threads (-t) on more CPUs, or from another host, and compare",
			"raise the generator's open-file limit (ulimit -n) or local port range when those ran out"}}
	for _, s := range res.SaturatedBy {
		f.Evidence = append(f.Evidence, report.Item{Text: s, Source: "load", Window: true})
	}
	return []report.Finding{f}
}
