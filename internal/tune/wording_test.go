package tune_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/tune"
	"github.com/netdoctor/netdoctor/internal/tune/tunetest"
)

// TestPlanIgnoresWording: the plan's changes come from what the report
// says as data, never from its words. Every report of the 25 real runs
// is planned twice against its host's recording: as written, and with
// every sentence reversed character by character — each fix line,
// action note and command, evidence text, title, subject, verdict,
// explanation, and the servers' own words (an upstream's why, notes).
// The changes must be the same: the same settings, files with the same
// diffs, listeners, in the same order, for the same findings (whose
// subjects, reworded, still name them); only the reasons, written for a
// person, may differ.
func TestPlanIgnoresWording(t *testing.T) {
	reports, err := filepath.Glob("../../testdata/runs/golden/*.json")
	if err != nil {
		t.Fatal(err)
	}
	reports = slices.DeleteFunc(reports, func(p string) bool { return strings.HasSuffix(p, ".plan.json") })
	if len(reports) < 25 {
		t.Fatalf("only %d golden reports", len(reports))
	}
	planned := 0
	for _, path := range reports {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run(name, func(t *testing.T) {
			host := filepath.Join("../../testdata/runs", name+".host.json")
			var doc map[string]any
			orig, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(orig, &doc); err != nil {
				t.Fatal(err)
			}
			reword(doc)
			reworded, err := json.Marshal(doc)
			if err != nil {
				t.Fatal(err)
			}
			want := changes(plan(t, orig, host), reverse)
			got := changes(plan(t, reworded, host), nil)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rewording the report changed its plan (-as written +reworded):\n%s", diff)
			}
			planned += len(want)
		})
	}
	if planned < 20 {
		t.Errorf("only %d changes planned in all: the test compares too little", planned)
	}
}

// plan builds the plan of a report against a host's recording.
func plan(t *testing.T, report []byte, host string) *tune.Plan {
	t.Helper()
	h, err := tunetest.Load(host)
	if err != nil {
		t.Fatal(err)
	}
	in, err := tune.ReadInput(bytes.NewReader(report))
	if err != nil {
		t.Fatal(err)
	}
	p, err := tune.Build(in, "report.json", h)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// changes is a plan's changes without their reasons, the findings they
// target named with their subjects as subject (if not nil) words them.
func changes(p *tune.Plan, subject func(string) string) []tune.Change {
	out := slices.Clone(p.Changes)
	for i := range out {
		out[i].Why = nil
		if subject == nil {
			continue
		}
		out[i].Findings = slices.Clone(out[i].Findings)
		for j, k := range out[i].Findings {
			if id, s, ok := strings.Cut(k, " "); ok {
				out[i].Findings[j] = id + " " + subject(s)
			}
		}
	}
	return out
}

// reword reverses every sentence of a report: the words a person reads,
// which no code may parse.
func reword(doc map[string]any) {
	words(doc, "verdict")
	for _, f := range list(doc["findings"]) {
		f := f.(map[string]any)
		words(f, "title", "subject", "explains", "cause_subject")
		for _, e := range list(f["evidence"]) {
			words(e.(map[string]any), "text")
		}
		fix := list(f["fix"])
		for i := range fix {
			fix[i] = reverse(fix[i].(string))
		}
		for _, a := range list(f["actions"]) {
			words(a.(map[string]any), "note", "command", "persist")
		}
	}
	for _, s := range list(doc["servers"]) {
		s := s.(map[string]any)
		notes := list(s["notes"])
		for i := range notes {
			notes[i] = reverse(notes[i].(string))
		}
		if n, ok := s["nginx"].(map[string]any); ok {
			for _, u := range list(n["upstreams"]) {
				words(u.(map[string]any), "why")
			}
		}
	}
	if sh, ok := doc["shape"].(map[string]any); ok {
		words(sh, "text")
	}
	notes := list(doc["load_notes"])
	for i := range notes {
		notes[i] = reverse(notes[i].(string))
	}
}

// words reverses the strings of m at keys.
func words(m map[string]any, keys ...string) {
	for _, k := range keys {
		if s, ok := m[k].(string); ok {
			m[k] = reverse(s)
		}
	}
}

func list(v any) []any {
	l, _ := v.([]any)
	return l
}

// reverse is s backwards: the same letters, no word left whole (an
// empty string stays empty, as an absent subject does).
func reverse(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}
