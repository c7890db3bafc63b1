package cli

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
	"github.com/netdoctor/netdoctor/internal/tune"
	"github.com/netdoctor/netdoctor/internal/tune/tunetest"
)

var update = flag.Bool("update", false, "rewrite the golden files of TestRunGolden")

// TestRunGolden diagnoses the evidence of real lab runs again
// (testdata/runs, written by TestCapture) and plans from each report
// against a recording of the lab's host, and holds the text, JSON and
// HTML reports and the plans to golden files: what netdoctor says about
// a given run must not change unless a change means it to.
func TestRunGolden(t *testing.T) {
	bundles, err := filepath.Glob("../../testdata/runs/*.bundle.json.gz")
	if err != nil || len(bundles) == 0 {
		t.Fatalf("no run bundles in testdata/runs: %v", err)
	}
	for _, path := range bundles {
		name := strings.TrimSuffix(filepath.Base(path), ".bundle.json.gz")
		t.Run(name, func(t *testing.T) {
			f, err := readBundle(path) // as diagnose reads it
			if err != nil || f.Kind != evidence.KindRun {
				t.Fatalf("%+v, %v", f, err)
			}
			res := run.Diagnose(f.Run)
			r := res.Report()
			var text, js, html bytes.Buffer
			if err := report.RunText(&text, r, true); err != nil {
				t.Fatal(err)
			}
			if err := indentedJSON(r)(&js); err != nil {
				t.Fatal(err)
			}
			if err := res.HTML(&html, r); err != nil {
				t.Fatal(err)
			}
			goldenFile(t, name+".txt", text.Bytes())
			goldenFile(t, name+".json", js.Bytes())
			goldenFile(t, name+".html", html.Bytes())

			host, err := tunetest.Load(filepath.Join(filepath.Dir(path), name+".host.json"))
			if err != nil {
				t.Fatal(err)
			}
			in, err := tune.ReadInput(bytes.NewReader(js.Bytes()))
			if err != nil {
				t.Fatal(err)
			}
			p, err := tune.Build(in, name+".json", host)
			if err != nil {
				t.Fatal(err)
			}
			p.Created = time.Time{}
			var pt, pj bytes.Buffer
			if err := p.Text(&pt); err != nil {
				t.Fatal(err)
			}
			if err := indentedJSON(p)(&pj); err != nil {
				t.Fatal(err)
			}
			goldenFile(t, name+".plan.txt", pt.Bytes())
			goldenFile(t, name+".plan.json", pj.Bytes())
		})
	}
}

// goldenFile compares got with testdata/runs/golden/NAME, or writes it
// there with -update.
func goldenFile(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("../../testdata/runs/golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./internal/cli -run TestRunGolden -update writes it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", name, diff)
	}
}
