package tune

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoFindingIDLiterals: tune's code names a finding by its constant in
// rules, never by its text, so that renaming an ID cannot leave a note
// or a reason naming the old one.
func TestNoFindingIDLiterals(t *testing.T) {
	ids := findingIDs(t)
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		for _, lit := range stringLits(t, file) {
			for _, id := range ids {
				if strings.Contains(lit.text, id) {
					t.Errorf("%s: %q names %s: use its constant in rules", lit.pos, lit.text, id)
				}
			}
		}
	}
}

// findingIDs are the finding IDs rules declares (`const X
// report.FindingID = "…"`).
func findingIDs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../rules/*.go")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			if sel, ok := vs.Type.(*ast.SelectorExpr); !ok || sel.Sel.Name != "FindingID" {
				return true
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					id, _ := strconv.Unquote(lit.Value)
					ids = append(ids, id)
				}
			}
			return true
		})
	}
	// The rules of every fix file, at least: fewer means the parse
	// missed them, and the test would pass on nothing.
	if len(ids) < 10 {
		t.Fatalf("only %d finding IDs found in ../rules: %q", len(ids), ids)
	}
	return ids
}

type stringLit struct {
	pos  token.Position
	text string
}

// stringLits are the string literals of a Go file.
func stringLits(t *testing.T, file string) []stringLit {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var lits []stringLit
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", fset.Position(lit.Pos()), err)
			}
			lits = append(lits, stringLit{pos: fset.Position(lit.Pos()), text: s})
		}
		return true
	})
	return lits
}
