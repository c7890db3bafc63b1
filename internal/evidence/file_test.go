package evidence

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
)

// fixture is a file of testdata, decompressed.
func fixture(t testing.TB, path string) []byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if raw, err = io.ReadAll(z); err != nil {
			t.Fatal(err)
		}
	}
	return raw
}

// TestReadOld: the files written before bundles said their kind are
// read by their content: a namespace bundle of version 1 (collect -o,
// its listeners' recv_q and send_q), and every real run bundle of
// testdata/runs (version 1: their load's status classes were "status").
func TestReadOld(t *testing.T) {
	f, err := Decode(fixture(t, "../../testdata/bundles/accept-overflow.json"))
	if err != nil || f.Kind != KindNamespace || f.Version != 1 || f.Bundle == nil || len(f.Bundle.Snapshots) == 0 {
		t.Fatalf("a version 1 bundle: %+v, %v", f, err)
	}
	queued := false
	for _, s := range f.Bundle.Snapshots {
		for _, l := range s.Sockets.Listeners {
			queued = queued || l.RecvQ > 0 && l.SendQ > 0
		}
	}
	if !queued {
		t.Error("version 1's recv_q and send_q were not read into the listeners' accept queue and backlog")
	}
	runs, err := filepath.Glob("../../testdata/runs/*.bundle.json.gz")
	if err != nil || len(runs) < 10 {
		t.Fatalf("run bundles: %d, %v", len(runs), err)
	}
	for _, p := range runs {
		f, err := Decode(fixture(t, p))
		if err != nil || f.Kind != KindRun || f.Run == nil || f.Run.Load == nil {
			t.Fatalf("%s: %+v, %v", p, f, err)
		}
		if f.Run.Load.Requests > 0 && len(f.Run.Load.Status) == 0 {
			t.Errorf("%s: version 1's load status classes were not read", p)
		}
		if f.Run.Server() == nil && f.Run.Client() == nil {
			t.Errorf("%s: no side observed", p)
		}
	}
}

// TestFileRoundTrip: each kind is written with its version and kind
// and read back as it was, an incident's dependency trace and profile
// included.
func TestFileRoundTrip(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	b := &Bundle{Version: BundleVersion, Host: Host{Hostname: "h"}, Start: t0,
		Snapshots: []Snapshot{{Time: t0, Sockets: &Sockets{Listeners: []Listener{{Proto: "tcp", Addr: "0.0.0.0:80", Port: 80, RecvQ: 3, SendQ: 511}}}}},
		Incident: &Incident{Time: t0, Findings: []IncidentFinding{{ID: "accept-queue-overflow", Time: t0}},
			Dependencies: &Traced{Start: t0, Seconds: 3, IntervalMS: 100, Followed: 1, Servers: []*app.Server{{Kind: "api", Addr: "10.0.0.1:8080",
				Deps: []app.Dependency{{Addr: "10.0.0.1:7300", Conns: 4, Busy: 0.5}}}}},
			Profile: &cpuprof.Profile{Hz: 49, Kept: 12}}}
	raw, err := json.Marshal(NamespaceFile(b))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte(`{"version":2,"kind":"namespace","host":`)) {
		t.Errorf("a namespace bundle begins %.60s", raw)
	}
	f, err := Decode(raw)
	if err != nil || f.Kind != KindNamespace {
		t.Fatalf("%+v, %v", f, err)
	}
	in := f.Bundle.Incident
	if in == nil || in.Dependencies == nil || in.Dependencies.Servers[0].Deps[0].Conns != 4 || in.Profile == nil || in.Profile.Hz != 49 {
		t.Errorf("the incident read back: %+v", in)
	}
	if again, _ := json.Marshal(NamespaceFile(f.Bundle)); !bytes.Equal(again, raw) {
		t.Errorf("written again differently:\n%s\n%s", raw, again)
	}

	side := &RunSide{SideInfo: SideInfo{Name: Client, Observed: true}, Bundle: b}
	shared := &RunSide{SideInfo: SideInfo{Name: Server, Observed: true, SameAs: Client}, Bundle: b}
	run := &Run{Port: "80", LoadStart: t0, Sides: []*RunSide{shared, side}}
	if _, err := json.Marshal(RunFile(run)); err == nil {
		t.Error("a run without its load was written")
	}
	run.Load = fixtureRun(t).Load
	raw, err = json.Marshal(RunFile(run))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(raw, []byte(`{"version":2,"kind":"run",`)) || bytes.Count(raw, []byte(`"snapshots"`)) != 1 {
		t.Errorf("a run bundle: %.60s…, its shared snapshots written %d times", raw, bytes.Count(raw, []byte(`"snapshots"`)))
	}
	if shared.Bundle != b {
		t.Error("writing took the shared side's snapshots from the run")
	}
	f, err = Decode(raw)
	if err != nil || f.Kind != KindRun || f.Run.Server() == nil || f.Run.Server().Bundle != f.Run.Client().Bundle {
		t.Fatalf("a run read back: %+v, %v", f, err)
	}
}

// fixtureRun is a real run's evidence.
func fixtureRun(t *testing.T) *Run {
	f, err := Decode(fixture(t, "../../testdata/runs/healthy.bundle.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return f.Run
}

// TestReadRejects: what is no bundle this netdoctor reads says what it
// is: not JSON, JSON of another kind (a report, a plan), a bundle of a
// newer version, one with nothing in it.
func TestReadRejects(t *testing.T) {
	for _, tt := range []struct {
		in    string
		newer bool   // a FileError of a newer version
		other bool   // a FileError: not a bundle
		want  string // else, in the error
	}{
		{in: `nope`, want: "invalid character"},
		{in: `[1, 2]`, want: "cannot unmarshal array"},
		{in: `{"a": 1}`, other: true},
		{in: `{"version": 2, "command": "check", "findings": []}`, other: true},
		{in: `{"version": 1, "report": "r.json", "command": "check", "changes": []}`, other: true},
		{in: `{"snapshots": [{}]}`, other: true},
		{in: `{"version": 2, "kind": "capacity"}`, other: true},
		{in: `{"version": 99, "snapshots": [{}]}`, newer: true},
		{in: `{"version": 9, "kind": "run", "load": {}}`, newer: true},
		{in: `{"version": 1, "snapshots": []}`, want: "no snapshots"},
		{in: `{"version": 2, "kind": "namespace"}`, want: "no snapshots"},
		{in: `{"version": 2, "kind": "namespace", "snapshots": 3}`, want: "cannot unmarshal number"},
		{in: `{"version": 1, "kind": "run"}`, want: "without a load"},
		{in: `{"version": 1, "kind": "run", "load": {}, "sides": [null]}`, want: "an empty side"},
	} {
		f, err := Read(strings.NewReader(tt.in))
		var fe *FileError
		switch {
		case f != nil || err == nil:
			t.Errorf("%s: read as %+v", tt.in, f)
		case tt.newer || tt.other:
			if !errors.As(err, &fe) || fe.Newer() != tt.newer {
				t.Errorf("%s: %v, want a FileError, newer %v", tt.in, err, tt.newer)
			}
		case errors.As(err, &fe) || !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: %v, want %q", tt.in, err, tt.want)
		}
	}
}

// FuzzRead reads what a user may be handed as a bundle (collect -o,
// run --bundle, an agent's incident; diagnose reads them): any input
// is a bundle file or an error, never a panic; one read holds what its
// kind says, its sides say whether they have snapshots, and it is
// written again and read back as the same kind.
func FuzzRead(f *testing.F) {
	f.Add(trimmedRun(f, "../../testdata/runs/nginx-nagle.bundle.json.gz"))
	f.Add(fixture(f, "../../testdata/bundles/accept-overflow.json"))
	f.Add([]byte(`{"kind": "run", "version": 1, "load": {}, "sides": [{"name": "server", "same_as": "client"}, {"name": "client", "bundle": {"snapshots": [{}]}}]}`))
	f.Add([]byte(`{"kind": "run", "version": 1, "load": {}, "sides": [null]}`))
	f.Add([]byte(`{"kind": "namespace", "version": 2, "snapshots": [{}], "incident": {"dependencies": {"servers": [null]}, "profile": {}}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		bf, err := Read(bytes.NewReader(b))
		if err != nil {
			if bf != nil {
				t.Fatalf("Read returned a file with error %v", err)
			}
			return
		}
		switch bf.Kind {
		case KindNamespace:
			if bf.Bundle == nil || len(bf.Bundle.Snapshots) == 0 || bf.Run != nil {
				t.Fatalf("a namespace bundle without its snapshots: %+v", bf)
			}
		case KindRun:
			if bf.Run == nil || bf.Run.Load == nil || bf.Bundle != nil {
				t.Fatalf("a run bundle without its run or load: %+v", bf)
			}
			for _, s := range bf.Run.Sides {
				if s == nil || s.Observed != (s.Bundle != nil && len(s.Bundle.Snapshots) > 0) {
					t.Fatalf("side %+v: observed does not say whether it has snapshots", s)
				}
			}
		default:
			t.Fatalf("a file of kind %q", bf.Kind)
		}
		out, err := json.Marshal(bf)
		if err != nil {
			t.Fatalf("a file read is not written again: %v", err)
		}
		if again, err := Decode(out); err != nil || again.Kind != bf.Kind {
			t.Fatalf("a file written again reads as %+v, %v", again, err)
		}
	})
}

// trimmedRun is a real run bundle with two snapshots a side: what matters
// to the reader, small enough to mutate quickly.
func trimmedRun(f *testing.F, path string) []byte {
	f.Helper()
	bf, err := Decode(fixture(f, path))
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range bf.Run.Sides {
		if s.SameAs == "" && s.Bundle != nil && len(s.Bundle.Snapshots) > 2 {
			s.Bundle.Snapshots = s.Bundle.Snapshots[:2]
		}
	}
	out, err := json.Marshal(bf)
	if err != nil {
		f.Fatal(err)
	}
	return out
}
