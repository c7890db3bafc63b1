package rules

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

// TestRegistry holds the registry to what docs/architecture.md promises
// a newcomer: each rule is one file named after it, with a test file;
// each finding ID is made by exactly one rule, declared in that rule's
// file, and documented there (its section of docs/findings.md:
// Class.Doc, or Rule.Doc for findings documented together).
func TestRegistry(t *testing.T) {
	byID := map[report.FindingID]string{}
	names := map[string]bool{}
	for _, r := range Registry {
		if r.Check == nil || len(r.IDs) == 0 {
			t.Errorf("rule %q: no Check or no IDs", r.Name)
		}
		if names[r.Name] {
			t.Errorf("two rules named %q", r.Name)
		}
		names[r.Name] = true
		src, err := os.ReadFile(r.Name + ".go")
		if err != nil {
			t.Errorf("rule %q has no file %s.go", r.Name, r.Name)
			continue
		}
		if _, err := os.Stat(r.Name + "_test.go"); err != nil {
			t.Errorf("rule %q has no test file %s_test.go", r.Name, r.Name)
		}
		for _, id := range r.IDs {
			if other, ok := byID[id]; ok {
				t.Errorf("%s is made by both %q and %q", id, other, r.Name)
			}
			byID[id] = r.Name
			decl := regexp.MustCompile(`(?m)^\s*(const )?[A-Z][A-Za-z]* +report\.FindingID = "` + regexp.QuoteMeta(string(id)) + `"`)
			alias := regexp.MustCompile(`(?m)^const [A-Z][A-Za-z]* = report\.[A-Z][A-Za-z]*$`) // declared with the report that names it
			if !decl.Match(src) && !alias.Match(src) {
				t.Errorf("%s is not declared in %s.go", id, r.Name)
			}
			if r.Doc == "" && strings.TrimSpace(ClassOf(id).Doc) == "" {
				t.Errorf("%s has no section for docs/findings.md: its Class.Doc (or its rule's Doc)", id)
			}
			if r.Doc != "" && ClassOf(id).Doc != "" {
				t.Errorf("%s has two sections: its rule's Doc and its class's", id)
			}
		}
	}
	// Every declared ID is made by a registered rule.
	for _, d := range declaredIDs(t) {
		if _, ok := byID[d]; !ok {
			t.Errorf("%s is declared but no rule in the registry makes it", d)
		}
	}
}

// declaredIDs are the finding IDs declared in this package's files.
func declaredIDs(t *testing.T) []report.FindingID {
	t.Helper()
	var out []report.FindingID
	ents, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	// The report declares the one its own text names.
	if b, err := os.ReadFile("../report/load.go"); err == nil {
		for _, m := range regexp.MustCompile(`FindingID = "([a-z0-9-]+)"`).FindAllSubmatch(b, -1) {
			out = append(out, report.FindingID(m[1]))
		}
	}
	re := regexp.MustCompile(`FindingID = "([a-z0-9-]+)"`)
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		b, err := os.ReadFile(e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			out = append(out, report.FindingID(m[1]))
		}
	}
	return out
}

// TestRulesReturnTheirIDs runs every rule on every case of every table
// and on real runs' evidence: a rule makes only the findings it declares.
func TestRulesReturnTheirIDs(t *testing.T) {
	declared := map[string]map[report.FindingID]bool{}
	for _, r := range Registry {
		declared[r.Name] = map[report.FindingID]bool{}
		for _, id := range r.IDs {
			declared[r.Name][id] = true
		}
	}
	for _, tb := range tables {
		for _, tc := range tb.cases() {
			for _, r := range Registry {
				if r.Scope != PerSide && r.Scope != PerHost {
					continue
				}
				for _, f := range r.Check(on(tc.bundle)) {
					if !declared[r.Name][f.ID] {
						t.Errorf("rule %s made %s, which it does not declare", r.Name, f.ID)
					}
				}
			}
		}
	}
}
