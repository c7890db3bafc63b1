package cli

import (
	"bytes"
	"compress/gzip"
	"errors"
	"os"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// FuzzReadBundle reads what a user may be handed as a bundle (collect
// -o, run --bundle, an agent's incident, which diagnose reads), gzip'd
// or not: any input is a bundle or a bad-input error, never a panic, and
// a bundle read is of a version this netdoctor reads with what its kind
// holds (evidence's FuzzRead is the reader's own).
func FuzzReadBundle(f *testing.F) {
	real, err := os.ReadFile("../../testdata/bundles/accept-overflow.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(real)
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(real)
	w.Close()
	f.Add(z.Bytes())
	f.Add([]byte(`{"version": 1, "host": {}, "snapshots": [{}]}`))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := dataReader(bytes.NewReader(b))
		if err != nil {
			return
		}
		bd, err := decodeBundle(r, "fuzz.json")
		if err != nil {
			if bd != nil || !errors.As(err, new(usageError)) {
				t.Fatalf("decodeBundle = %v, %v; want no bundle and bad input", bd, err)
			}
			return
		}
		if bd.Version < 1 || bd.Version > evidence.BundleVersion ||
			(bd.Kind != evidence.KindNamespace || bd.Bundle == nil || len(bd.Bundle.Snapshots) == 0) &&
				(bd.Kind != evidence.KindRun || bd.Run == nil || bd.Run.Load == nil) {
			t.Fatalf("bundle read: %+v", bd)
		}
	})
}
