package tune_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/tune"
	"github.com/netdoctor/netdoctor/internal/tune/tunetest"
)

// TestFixturePlansAllowed plans from every real run report
// (testdata/runs/golden, the reports TestRunGolden holds) against its
// recorded host, as the goldens do, and checks every change as apply
// will: each setting in the allowed set, within its bounds and in its
// scope; each file's new content the file as recorded with only the
// edits apply accepts. A fix that proposes what apply would refuse, or
// a bound too tight for a real run, fails here.
func TestFixturePlansAllowed(t *testing.T) {
	reports, err := filepath.Glob("../../testdata/runs/golden/*.json")
	if err != nil {
		t.Fatal(err)
	}
	var sysctls, files int
	for _, path := range reports {
		if strings.HasSuffix(path, ".plan.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		host, err := tunetest.Load(filepath.Join("../../testdata/runs", name+".host.json"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tune.ReadInput(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		p, err := tune.Build(in, name+".json", host)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// Build notes a setting outside the set, or a value past its
		// bounds, instead of proposing it: no fix of netdoctor's should
		// propose the one, no real run come near the other.
		for _, n := range p.Notes {
			if strings.Contains(n, "not planned: ") {
				t.Errorf("%s: %s", name, n)
			}
		}
		for _, c := range p.Changes {
			switch {
			case c.Sysctl != nil:
				sysctls++
				if err := tune.CheckAllowed(*c.Sysctl); err != nil {
					t.Errorf("%s: %s: %v", name, c.Title(), err)
				}
			case c.File != nil:
				files++
				old, err := host.ReadFile(c.File.Path)
				if err != nil {
					t.Fatal(err)
				}
				if err := tune.CheckEdits(c.File.App, old, []byte(c.File.Content)); err != nil {
					t.Errorf("%s: %s: %v", name, c.Title(), err)
				}
			}
		}
	}
	if sysctls < 10 || files < 5 {
		t.Errorf("checked %d settings and %d files: the fixtures should give more", sysctls, files)
	}
	t.Logf("%d settings and %d files checked", sysctls, files)
}

// TestPlanAccountsForEveryFinding: every finding of the 25 real runs'
// reports ends in the plan as a change that names it or as a note that
// says why not ("not planned, because…"): a plan never leaves a finding
// out silently, as one once left a python3 listener's overflowing queue.
func TestPlanAccountsForEveryFinding(t *testing.T) {
	reports, err := filepath.Glob("../../testdata/runs/golden/*.json")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, path := range reports {
		if strings.HasSuffix(path, ".plan.json") {
			continue
		}
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		host, err := tunetest.Load(filepath.Join("../../testdata/runs", name+".host.json"))
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		in, err := tune.ReadInput(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		p, err := tune.Build(in, name+".json", host)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, fd := range in.Findings {
			k := strings.TrimSpace(string(fd.ID) + " " + fd.Subject)
			planned := false
			for _, c := range p.Changes {
				planned = planned || slices.Contains(c.Findings, k)
			}
			for _, note := range p.Notes {
				planned = planned || strings.HasPrefix(note, k+": ")
			}
			if !planned {
				t.Errorf("%s: %s has neither a change nor a note", name, k)
			}
			n++
		}
	}
	if n < 50 {
		t.Errorf("only %d findings checked", n)
	}
}
