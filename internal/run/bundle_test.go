package run

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// readFixture reads a real run bundle of testdata/runs as diagnose
// does, with the one reader of bundle files.
func readFixture(t *testing.T, name string) *evidence.Run {
	t.Helper()
	f, err := os.Open("../../testdata/runs/" + name + ".bundle.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return readRun(t, z)
}

// readRun reads a bundle file that must be a run's.
func readRun(t *testing.T, r io.Reader) *evidence.Run {
	t.Helper()
	f, err := evidence.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	if f.Kind != evidence.KindRun {
		t.Fatalf("a bundle of kind %q, want a run's", f.Kind)
	}
	return f.Run
}

func reportJSON(t *testing.T, res *Result) string {
	t.Helper()
	b, err := json.MarshalIndent(res.Report(), "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBundleRoundTrip: a run's bundle, written and read back, is
// diagnosed to the same report.
func TestBundleRoundTrip(t *testing.T) {
	res := Diagnose(readFixture(t, "nginx-php-throughput"))
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(evidence.RunFile(res.Run)); err != nil {
		t.Fatal(err)
	}
	back := readRun(t, &buf)
	if diff := cmp.Diff(reportJSON(t, res), reportJSON(t, Diagnose(back))); diff != "" {
		t.Errorf("report after a round trip mismatch (-want +got):\n%s", diff)
	}
	if len(res.Findings) == 0 {
		t.Fatal("the fixture has no findings: the comparison proves nothing")
	}
}

// TestBundleSharedSide: a server in the client's namespace is written
// without snapshots of its own, read back with the client's, and its
// findings carry the local side.
func TestBundleSharedSide(t *testing.T) {
	// The server's snapshots of seed 000 stand in for one namespace that
	// holds both ends.
	b := readFixture(t, "nginx-php-throughput")
	var client *evidence.RunSide
	for _, s := range b.Sides {
		if s.Name == report.Client {
			client = s
		}
	}
	client.Bundle = b.Server().Bundle
	shared := &evidence.RunSide{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true, Why: "same namespace as the client", SameAs: report.Client}, Bundle: client.Bundle}
	b.Sides = []*evidence.RunSide{shared, client}
	res := Diagnose(b)
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(evidence.RunFile(res.Run)); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte(`"snapshots"`)); n != 1 {
		t.Errorf("the shared snapshots are written %d times, want once", n)
	}
	if shared.Bundle == nil {
		t.Error("writing the bundle took the shared side's snapshots from the run")
	}
	back := readRun(t, &buf)
	if back.Sides[0].Bundle == nil || back.Sides[0].Bundle != back.Sides[1].Bundle {
		t.Fatalf("the server side did not get the client's snapshots back")
	}
	got := Diagnose(back)
	local := 0
	for _, f := range got.Findings {
		if f.Side == report.Local {
			local++
		}
		if f.Side == report.Server && f.ID != rules.NagleDelayedACK {
			t.Errorf("%s on the server side, want local", f.ID)
		}
	}
	if local == 0 {
		t.Errorf("no finding on the local side: %+v", got.Findings)
	}
}
