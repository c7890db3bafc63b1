package rules

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// realRuns are the evidence of real lab runs (testdata/runs, written by
// the CLI's TestCapture), read as diagnose reads them (evidence.Read).
func realRuns(t *testing.T) map[string]*evidence.Run {
	t.Helper()
	paths, err := filepath.Glob("../../testdata/runs/*.bundle.json.gz")
	if err != nil || len(paths) < 10 {
		t.Fatalf("run bundles: %d, %v", len(paths), err)
	}
	out := map[string]*evidence.Run{}
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		z, err := gzip.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		bf, err := evidence.Read(z)
		f.Close()
		if err != nil || bf.Kind != evidence.KindRun {
			t.Fatalf("%s: %+v, %v", p, bf, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".bundle.json.gz")] = bf.Run
	}
	return out
}

// fingerprints are what a rule says of each finding: its title,
// evidence and fix, with what tells it from another.
func fingerprints(t *testing.T, fs []report.Finding) []string {
	t.Helper()
	var out []string
	for _, f := range fs {
		b, err := json.Marshal(struct {
			ID       report.FindingID
			Subject  string
			Side     report.Side
			Title    string
			Evidence []report.Item
			Actions  []report.Action
		}{f.ID, f.Subject, f.Side, f.Title, f.Evidence, f.Actions})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// TestPassesAddData: the passes that look across findings (the baseline,
// the shape, relate, explain, rank) add what they find as data and never
// change what a rule said: each finding's title, evidence and fix are its
// rule's, in every real run and in each of its sides checked as check
// checks a namespace.
func TestPassesAddData(t *testing.T) {
	var cases []*diagnosis
	for _, r := range realRuns(t) {
		cases = append(cases, &diagnosis{run: r})
		for _, s := range observed(r) {
			cases = append(cases, &diagnosis{bundle: s.Bundle})
		}
	}
	related := 0
	for _, d := range cases {
		d.rules = Registry
		for _, p := range passes {
			before := fingerprints(t, d.found)
			p.do(d)
			if p.makes {
				continue
			}
			if after := fingerprints(t, d.found); !slices.Equal(before, after) {
				t.Errorf("pass %s changed what the rules said:\nbefore %q\nafter  %q", p.name, before, after)
			}
		}
		for _, f := range d.found {
			if f.CausedBy != "" {
				related++
			}
		}
	}
	if related == 0 {
		t.Error("no real run relates two findings: the test shows nothing")
	}
}

// TestProfiledWithoutTrace: check's profile of the servers is judged
// whether the dependencies' trace succeeded or not (it fails where BPF
// is refused while perf_event is allowed): the rules that read it run
// with the profile and no trace, and the rules of the trace do not.
func TestProfiledWithoutTrace(t *testing.T) {
	var profiled, traced int
	rs := []Rule{
		{Name: "profiled", Scope: PerRun, Profiled: true, Check: func(in *Input) []report.Finding {
			if in.Profile != nil && in.Profile.Profile != nil {
				profiled++
			}
			return nil
		}},
		{Name: "traced", Scope: PerRun, Traced: true, Check: func(in *Input) []report.Finding { traced++; return nil }},
	}
	p := &evidence.HostProfile{Profile: &cpuprof.Profile{}}
	diagnose(&diagnosis{bundle: seed000(), profile: p, rules: rs})
	if profiled != 1 || traced != 0 {
		t.Errorf("profile without a trace: the profile's rule ran %d times, the trace's %d", profiled, traced)
	}
	profiled, traced = 0, 0
	diagnose(&diagnosis{bundle: seed000(), traced: &evidence.Traced{}, profile: &evidence.HostProfile{Error: "perf_event refused"}, rules: rs})
	if profiled != 0 || traced != 1 {
		t.Errorf("a trace without a profile: the profile's rule ran %d times, the trace's %d", profiled, traced)
	}
}
