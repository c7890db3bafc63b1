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
