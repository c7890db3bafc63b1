package rules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// sameName are string literals that spell a finding ID but name another
// thing: the kernel log's classes (kmsg) and the load generator's error
// causes, named after the same faults.
var sameName = map[string]bool{
	"kmsg/classify.go conntrack-table-full":     true,
	"kmsg/classify.go neighbour-table-overflow": true,
	"load/causes.go fd-limit":                   true,
	"load/engine.go fd-limit":                   true,
}

// TestNoFindingIDLiterals: outside the declaration of its constant, code
// names a finding by that constant, never by its text, so that renaming
// an ID cannot leave a note, a fix or a switch naming the old one. Tests
// and docs may spell them out.
func TestNoFindingIDLiterals(t *testing.T) {
	var ids []string
	for _, r := range Registry {
		for _, id := range r.IDs {
			ids = append(ids, string(id))
		}
	}
	word := regexp.MustCompile(`(^|[^a-z0-9-])(` + strings.Join(ids, "|") + `)($|[^a-z0-9-])`)
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		checked++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if vs, ok := n.(*ast.ValueSpec); ok {
				if sel, ok := vs.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "FindingID" {
					return false // the declaration
				}
				if id, ok := vs.Type.(*ast.Ident); ok && id.Name == "FindingID" {
					return false
				}
			}
			// A class's summary row is docs/findings.md's, which may
			// name other findings in its words.
			if cl, ok := n.(*ast.CompositeLit); ok {
				if id, ok := cl.Type.(*ast.Ident); ok && id.Name == "Class" {
					return false
				}
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, _ := strconv.Unquote(lit.Value)
			m := word.FindStringSubmatch(s)
			rel := strings.TrimPrefix(filepath.ToSlash(path), "../")
			if m != nil && !sameName[rel+" "+m[2]] {
				t.Errorf("%s: %q names %s: use its constant", fset.Position(lit.Pos()), s, m[2])
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 50 {
		t.Fatalf("only %d files checked", checked)
	}
}

// prose are the fields of findings and of the application evidence that
// hold words for a person: code never searches them (fixes are data:
// report.Action, Finding.About, app.NginxUpstream's facts).
var prose = map[string]bool{"Title": true, "Subject": true, "Text": true, "Fix": true, "Note": true, "Why": true, "Explains": true, "CauseSubject": true, "Lines": true}

// proseReaders are the functions that would search them.
var proseReaders = map[string]bool{"Contains": true, "ContainsAny": true, "ContainsRune": true, "HasPrefix": true, "HasSuffix": true, "Cut": true, "CutPrefix": true, "CutSuffix": true,
	"Index": true, "IndexByte": true, "LastIndex": true, "LastIndexByte": true, "Fields": true, "Split": true, "SplitN": true, "TrimPrefix": true, "TrimSuffix": true, "EqualFold": true}

// TestNoProseParsing: no production code that handles findings searches
// the words of a finding or of the application evidence
// (strings.Contains(u.Why, …), strings.Cut(f.Subject, " → ")), nor
// matches a regular expression in the packages that make, read and act
// on findings, except where tune edits configuration files.
func TestNoProseParsing(t *testing.T) {
	regexpOK := map[string]bool{"tune/edit.go": true, "tune/editcheck.go": true}
	checked := 0
	for _, dir := range []string{"../report", "../rules", "../tune", "../alerts", "../agent", "../run", "../app", "../cli", "../lab", "../source"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || strings.Contains(path, "tunetest") {
				return err
			}
			checked++
			rel := strings.TrimPrefix(filepath.ToSlash(path), "../")
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, 0)
			if err != nil {
				return err
			}
			for _, im := range f.Imports {
				if im.Path.Value == `"regexp"` && !regexpOK[rel] && findingsPkg(rel) {
					t.Errorf("%s imports regexp", rel)
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || len(call.Args) == 0 {
					return true
				}
				fn, ok := call.Fun.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if pkg, isPkg := fn.X.(*ast.Ident); !isPkg || pkg.Name != "strings" || !proseReaders[fn.Sel.Name] {
					return true
				}
				for _, a := range call.Args {
					if ix, ok := a.(*ast.IndexExpr); ok {
						a = ix.X
					}
					if sel, ok := a.(*ast.SelectorExpr); ok && prose[sel.Sel.Name] {
						t.Errorf("%s: strings.%s searches %s, words for a person: read a typed field", fset.Position(call.Pos()), fn.Sel.Name, sel.Sel.Name)
					}
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 60 {
		t.Fatalf("only %d files checked", checked)
	}
}

// findingsPkg reports the packages that make, read and act on findings,
// where no regular expression belongs.
func findingsPkg(rel string) bool {
	for _, p := range []string{"report/", "rules/", "tune/", "alerts/", "agent/", "run/"} {
		if strings.HasPrefix(rel, p) {
			return true
		}
	}
	return false
}
