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
			// A class's summary row and a class's or a rule's section
			// are docs/findings.md's, which may name other findings in
			// their words.
			if cl, ok := n.(*ast.CompositeLit); ok {
				if id, ok := cl.Type.(*ast.Ident); ok && (id.Name == "Class" || id.Name == "Rule") {
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

// idHomes are the files where each finding ID's constants may be named:
// where a constant of it is declared (its rule's file; the report's, for
// the two the report's own text names) and where its class is defined.
// Anything else that acts on what a finding means reads its class.
func idHomes(t *testing.T) (consts map[string]string, homes map[string]map[string]bool) {
	t.Helper()
	consts = map[string]string{} // "pkg.Name" → ID
	homes = map[string]map[string]bool{}
	home := func(id, file string) {
		if homes[id] == nil {
			homes[id] = map[string]bool{}
		}
		homes[id][file] = true
	}
	alias := map[string]string{} // "rules.Name" → "report.Name"
	for _, pkg := range []string{"rules", "report"} {
		files, err := filepath.Glob("../" + pkg + "/*.go")
		if err != nil {
			t.Fatal(err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			rel := strings.TrimPrefix(filepath.ToSlash(path), "../")
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				vs, ok := n.(*ast.ValueSpec)
				if !ok || len(vs.Values) != len(vs.Names) {
					return true
				}
				for i, v := range vs.Values {
					switch v := v.(type) {
					case *ast.BasicLit:
						if id, err := strconv.Unquote(v.Value); err == nil && v.Kind == token.STRING && isFindingType(vs.Type) {
							consts[pkg+"."+vs.Names[i].Name] = id
							home(id, rel)
						}
					case *ast.SelectorExpr:
						if x, ok := v.X.(*ast.Ident); ok && x.Name == "report" {
							alias[pkg+"."+vs.Names[i].Name] = "report." + v.Sel.Name
							home("alias "+pkg+"."+vs.Names[i].Name, rel)
						}
					}
				}
				return true
			})
		}
	}
	for a, target := range alias {
		if id, ok := consts[target]; ok {
			consts[a] = id
			for f := range homes["alias "+a] {
				home(id, f)
			}
		}
	}
	// The file that defines its class.
	files, _ := filepath.Glob("*.go")
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			cl, ok := n.(*ast.CompositeLit)
			if !ok {
				return true
			}
			if ty, ok := cl.Type.(*ast.Ident); !ok || ty.Name != "Class" {
				return true
			}
			for _, e := range cl.Elts {
				if kv, ok := e.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == "ID" {
					if c, ok := kv.Value.(*ast.Ident); ok {
						home(consts["rules."+c.Name], "rules/"+path)
					}
				}
			}
			return true
		})
	}
	return consts, homes
}

// isFindingType reports a declared type of report.FindingID.
func isFindingType(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.SelectorExpr:
		return e.Sel.Name == "FindingID"
	case *ast.Ident:
		return e.Name == "FindingID"
	}
	return false
}

// allowedElsewhere are the files, outside their homes, that may name a finding
// by its constant: a tune fix file is that finding's fix (it registers
// itself for it: planFix), and the lab's scenarios are test data that
// say which findings a scenario must raise.
func allowedElsewhere(rel string) bool {
	return strings.HasPrefix(rel, "tune/fix_") || rel == "lab/scenarios.go"
}

// TestFindingIDsStayHome: no production code names a finding ID's
// constant outside its rule's file and its class (and the report's file
// for the two it declares): what a finding causes, owns, reports and
// documents is declared with it (rules.Class, rules.Rule), and code that
// acts on what findings mean reads their classes. Only tune's fix files
// and the lab's scenarios may name others (allowedElsewhere).
func TestFindingIDsStayHome(t *testing.T) {
	consts, homes := idHomes(t)
	if len(consts) < 25 || len(homes[string(AcceptQueueOverflow)]) != 1 || len(homes[string(UnexplainedDistress)]) != 2 {
		t.Fatalf("%d constants; homes %v", len(consts), homes)
	}
	checked := 0
	// The module's production code: internal, cmd, bench, the root.
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && (d.Name() == "testdata" || d.Name() == "tools" || strings.HasPrefix(d.Name(), ".") && d.Name() != "." && d.Name() != "..") {
			if err == nil {
				err = filepath.SkipDir
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		rel := strings.TrimPrefix(filepath.ToSlash(path), "../../internal/")
		if allowedElsewhere(rel) {
			return nil
		}
		checked++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		named := func(n ast.Node, key string) {
			id, ok := consts[key]
			if ok && !homes[id][rel] {
				t.Errorf("%s: names %s (%s), which only its rule's file and class may: read its class (rules.ClassOf) instead", fset.Position(n.Pos()), key, id)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && (x.Name == "rules" || x.Name == "report") {
					named(n, x.Name+"."+n.Sel.Name)
				}
				return false
			case *ast.Ident:
				if pkg == "rules" || pkg == "report" {
					named(n, pkg+"."+n.Name)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 300 {
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
