package report_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

// docFields reads the field table of docs/report.md: each row's field
// paths (`findings[].id`) and the row's text, which names a composite
// field's own fields (`sides[]`: `name`, `netns`…).
func docFields(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../../docs/report.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	in := false
	tick := regexp.MustCompile("`([^`]+)`")
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case line == "| field | meaning |":
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in && !strings.HasPrefix(line, "|---"):
			cells := strings.SplitN(line, "|", 3)
			for _, m := range tick.FindAllStringSubmatch(cells[1], -1) {
				rows[m[1]] = cells[2]
			}
		}
	}
	if len(rows) < 10 {
		t.Fatalf("docs/report.md: %d rows in the field table", len(rows))
	}
	return rows
}

// goldenPaths are the field paths of a report, as docs/report.md writes
// them: top-level fields, their fields, and the fields of a finding's
// evidence and actions. The load's own fields are docs/load.md's.
func goldenPaths(v map[string]any, into map[string]bool) {
	var walk func(prefix string, v any, depth int)
	walk = func(prefix string, v any, depth int) {
		switch x := v.(type) {
		case []any:
			for _, e := range x {
				walk(prefix+"[]", e, depth)
			}
		case map[string]any:
			for k, e := range x {
				p := strings.TrimPrefix(prefix+"."+k, ".")
				_, isList := e.([]any)
				if isList {
					into[p+"[]"] = true
				} else {
					into[p] = true
				}
				if p == "load" || p == "summary" || depth >= 1 && !strings.HasPrefix(p, "findings[]") || depth >= 2 {
					continue
				}
				walk(p, e, depth+1)
			}
		}
	}
	walk("", v, 0)
}

// TestDocsMatchReport holds docs/report.md to the reports netdoctor
// writes: every field of the golden reports (a check's and every run's)
// is documented, in a row of its own or named in its parent's, and every
// documented field exists in the Go types the reports are written from.
func TestDocsMatchReport(t *testing.T) {
	rows := docFields(t)
	files, _ := filepath.Glob("../../testdata/runs/golden/*.json")
	files = slices.DeleteFunc(files, func(f string) bool { return strings.HasSuffix(f, ".plan.json") })
	files = append(files, "testdata/accept-overflow.json.golden")
	paths := map[string]bool{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		goldenPaths(v, paths)
	}
	for p := range paths {
		if _, ok := rows[p]; ok {
			continue
		}
		if _, ok := rows[strings.TrimSuffix(p, "[]")]; ok {
			continue
		}
		if documentedChildren(rows, p) {
			continue
		}
		i := strings.LastIndex(p, ".")
		if i > 0 && strings.Contains(rows[p[:i]], "`"+strings.TrimSuffix(p[i+1:], "[]")+"`") {
			continue
		}
		t.Errorf("docs/report.md does not document %s (a row of its own, or `%s` in its parent's row)", p, p[i+1:])
	}
	typ := reflect.TypeOf(report.Run{})
	for p := range rows {
		if _, err := fieldType(typ, p); err != "" {
			t.Errorf("docs/report.md documents %s, which the report does not have: %s", p, err)
		}
	}
}

// documentedChildren reports a composite field whose fields have rows
// of their own (`findings[]`: `findings[].id`…).
func documentedChildren(rows map[string]string, p string) bool {
	for r := range rows {
		if strings.HasPrefix(r, p+".") {
			return true
		}
	}
	return false
}

// fieldType follows a documented path through the JSON names of the
// report's types.
func fieldType(typ reflect.Type, path string) (reflect.Type, string) {
	for _, seg := range strings.Split(path, ".") {
		name, list := strings.CutSuffix(seg, "[]")
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		f, ok := jsonField(typ, name)
		if !ok {
			return nil, "no field " + name + " in " + typ.String()
		}
		typ = f
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		if list {
			if typ.Kind() != reflect.Slice {
				return nil, name + " is not a list"
			}
			typ = typ.Elem()
		}
	}
	return typ, ""
}

// jsonField finds the field written as name, through embedded structs.
func jsonField(typ reflect.Type, name string) (reflect.Type, bool) {
	if typ.Kind() != reflect.Struct {
		return nil, false
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == "-" {
			continue
		}
		if f.Anonymous && tag == "" {
			e := f.Type
			for e.Kind() == reflect.Pointer {
				e = e.Elem()
			}
			if t, ok := jsonField(e, name); ok {
				return t, true
			}
			continue
		}
		if tag == name || tag == "" && f.Name == name {
			return f.Type, true
		}
	}
	return nil, false
}

// TestDocsStatuses: docs/report.md's table of statuses lists exactly the
// outcomes a report can have.
func TestDocsStatuses(t *testing.T) {
	b, err := os.ReadFile("../../docs/report.md")
	if err != nil {
		t.Fatal(err)
	}
	var got []report.Outcome
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "| `status` | `verdict` |"):
			in = true
		case in && !strings.HasPrefix(line, "|"):
			in = false
		case in && strings.HasPrefix(line, "| `"):
			v, _, _ := strings.Cut(strings.TrimPrefix(line, "| `"), "`")
			got = append(got, report.Outcome(v))
		}
	}
	if !slices.Equal(got, report.Outcomes) {
		t.Errorf("docs/report.md lists statuses %v, want %v", got, report.Outcomes)
	}
}
