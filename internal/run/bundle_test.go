package run

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

func readFixture(t *testing.T, name string) *Bundle {
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
	b, err := ReadBundle(z)
	if err != nil {
		t.Fatal(err)
	}
	return b
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
	if err := json.NewEncoder(&buf).Encode(res.Bundle()); err != nil {
		t.Fatal(err)
	}
	back, err := ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
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
	client.Bundle = b.Run.Server().Bundle
	shared := &evidence.RunSide{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true, Why: "same namespace as the client", SameAs: report.Client}, Bundle: client.Bundle}
	b.Sides = []*evidence.RunSide{shared, client}
	res := Diagnose(b)
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(res.Bundle()); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(buf.Bytes(), []byte(`"snapshots"`)); n != 1 {
		t.Errorf("the shared snapshots are written %d times, want once", n)
	}
	back, err := ReadBundle(&buf)
	if err != nil {
		t.Fatal(err)
	}
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

// TestReadBundleRejects: what is not a run bundle is refused.
func TestReadBundleRejects(t *testing.T) {
	for _, s := range []string{`nope`, `{"version":1,"snapshots":[]}`, `{"version":9,"kind":"run","load":{}}`, `{"version":1,"kind":"run"}`,
		`{"version":1,"kind":"run","load":{},"sides":[null]}`} {
		if _, err := ReadBundle(bytes.NewReader([]byte(s))); err == nil {
			t.Errorf("ReadBundle(%s) accepted it", s)
		}
	}
}
