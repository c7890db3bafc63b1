package run

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"testing"
)

// FuzzReadBundle reads what a user may be handed as a run's evidence
// (run --bundle, which diagnose reads): any input is a bundle or an
// error, never a panic, and a bundle read has its load and its sides.
func FuzzReadBundle(f *testing.F) {
	f.Add(trimmedBundle(f, "../../testdata/runs/nginx-nagle.bundle.json.gz"))
	f.Add([]byte(`{"kind": "run", "version": 1, "load": {}, "sides": [{"name": "server", "same_as": "client"}, {"name": "client", "bundle": {"snapshots": [{}]}}]}`))
	f.Add([]byte(`{"kind": "run", "version": 1, "load": {}, "sides": [null]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rb, err := ReadBundle(bytes.NewReader(b))
		if err != nil {
			if rb != nil {
				t.Fatalf("ReadBundle returned a bundle with error %v", err)
			}
			return
		}
		if rb.Run == nil || rb.Load == nil {
			t.Fatalf("a bundle without its run or load: %+v", rb)
		}
		for _, s := range rb.Sides {
			if s == nil || s.Observed != (s.Bundle != nil && len(s.Bundle.Snapshots) > 0) {
				t.Fatalf("side %+v: observed does not say whether it has snapshots", s)
			}
		}
	})
}

// trimmedBundle is a real bundle with two snapshots a side: what matters
// to the reader, small enough to mutate quickly.
func trimmedBundle(f *testing.F, path string) []byte {
	f.Helper()
	file, err := os.Open(path)
	if err != nil {
		f.Fatal(err)
	}
	defer file.Close()
	z, err := gzip.NewReader(file)
	if err != nil {
		f.Fatal(err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		f.Fatal(err)
	}
	rb, err := ReadBundle(bytes.NewReader(b))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range rb.Sides {
		if s.SameAs == "" && s.Bundle != nil && len(s.Bundle.Snapshots) > 2 {
			s.Bundle.Snapshots = s.Bundle.Snapshots[:2]
		}
		if s.SameAs != "" {
			s.Bundle = nil
		}
	}
	out, err := json.Marshal(rb)
	if err != nil {
		f.Fatal(err)
	}
	return out
}
