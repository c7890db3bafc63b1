package report

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRead reads what a user may be handed as a report (run, check,
// diagnose or load JSON): any input is a report or an error, never a
// panic, and a report read has its contract's parts.
func FuzzRead(f *testing.F) {
	paths, _ := filepath.Glob("../../testdata/runs/golden/*.json")
	n := 0
	for _, p := range paths {
		// Two real reports keep the seeds' mutations quick; the corpus in
		// testdata/fuzz/FuzzRead holds small ones of every kind.
		if strings.HasSuffix(p, ".plan.json") || n == 2 {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		n++
	}
	f.Add([]byte(`{"version": 1, "command": "load", "result": {"requests": 3}, "findings": []}`))
	f.Add([]byte(`{"version": 1, "command": "check", "findings": [{"id": "x", "evidence": [{}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Read(strings.NewReader(string(b)))
		if err != nil {
			var k *KindError
			if r != nil || !errors.As(err, &k) && !strings.HasPrefix(err.Error(), "not a netdoctor report") {
				t.Fatalf("Read = %v, %v; want no report and a report error", r, err)
			}
			return
		}
		if r.Report == nil || r.Version != Version {
			t.Fatalf("Read = %+v, want a report of version %d", r, Version)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatalf("a report read does not write back: %v", err)
		}
	})
}
