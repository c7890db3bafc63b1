package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/load"
)

// Kind is what a bundle file holds; its "kind" says so, and Read decodes
// it by that alone.
type Kind string

// The kinds of bundle files.
const (
	// KindNamespace is one namespace's snapshots (a Bundle): `collect
	// --out`, and the agent's incidents (with their Incident).
	KindNamespace Kind = "namespace"
	// KindRun is everything a run observed (a Run): `run --bundle`.
	KindRun Kind = "run"
)

// File is a bundle file, as written and as read: its kind, its version,
// and the one of Bundle and Run that its kind says it holds.
type File struct {
	// Version is, as read, the version the file was written at; its
	// content is read into this version's vocabulary, and a File is
	// always written at BundleVersion.
	Version int
	Kind    Kind
	Bundle  *Bundle // KindNamespace
	Run     *Run    // KindRun
}

// NamespaceFile is b as a bundle file.
func NamespaceFile(b *Bundle) *File {
	return &File{Version: BundleVersion, Kind: KindNamespace, Bundle: b}
}

// RunFile is a run's evidence as a bundle file. A side sharing the
// other's namespace shares its snapshots: they are written once, with
// the side that took them (Read gives them back to both). r is not
// changed.
func RunFile(r *Run) *File {
	run := *r
	run.Sides = nil
	for _, s := range r.Sides {
		c := *s
		if c.SameAs != "" {
			c.Bundle = nil
		}
		run.Sides = append(run.Sides, &c)
	}
	return &File{Version: BundleVersion, Kind: KindRun, Run: &run}
}

// namespaceJSON and runJSON are the two kinds as JSON: the version and
// the kind, then what the kind holds, at the top level.
type namespaceJSON struct {
	Version int  `json:"version"`
	Kind    Kind `json:"kind"`
	*Bundle
}

type runJSON struct {
	Version int  `json:"version"`
	Kind    Kind `json:"kind"`
	*Run
}

// MarshalJSON writes the file as its kind is written: {"version",
// "kind", and the Bundle's or the Run's fields}.
func (f *File) MarshalJSON() ([]byte, error) {
	switch {
	case f.Kind == KindNamespace && f.Bundle != nil:
		return json.Marshal(namespaceJSON{BundleVersion, f.Kind, f.Bundle})
	case f.Kind == KindRun && f.Run != nil && f.Run.Load != nil:
		return json.Marshal(runJSON{BundleVersion, f.Kind, f.Run})
	}
	// What Read would refuse is not written.
	return nil, fmt.Errorf("bundle file of kind %q without its content", f.Kind)
}

// FileError is a JSON document that is no bundle this netdoctor reads:
// of a newer version, or of no kind it knows (a report, a plan, other
// JSON). Kind is its kind, or KindNamespace for one written before
// bundles said their kind.
type FileError struct {
	Version int
	Kind    Kind
}

func (e *FileError) Error() string {
	if e.Newer() {
		return fmt.Sprintf("a netdoctor bundle of version %d, newer than this netdoctor reads (1 to %d): use the netdoctor that wrote it", e.Version, BundleVersion)
	}
	return fmt.Sprintf("not a netdoctor bundle (kind %q, version %d)", e.Kind, e.Version)
}

// Newer reports a bundle of a version after this netdoctor's.
func (e *FileError) Newer() bool { return e.Kind != "" && e.Version > BundleVersion }

// ErrNoSnapshots is a namespace bundle without a snapshot: nothing to
// diagnose.
var ErrNoSnapshots = errors.New("no snapshots in the bundle")

// Read is the one reader of bundle files, whichever their kind, of
// every version: it decodes what the file's "kind" says it holds. A
// file written before bundles said their kind (version 1 or 2) is a
// namespace bundle when it has snapshots (a run bundle always said
// "run"). Version 1's names are read into version 2's: a listener's
// recv_q and send_q (kernel.Listener), dotted counter names (Counters),
// a run's load status classes. Input is capped (capped.Bundle); an error
// is a FileError (not a bundle, or a newer one), ErrNoSnapshots, one
// saying what a run bundle lacks, the JSON decoder's as it is (a syntax
// or type error, for the caller to word), or the input's.
func Read(r io.Reader) (*File, error) {
	raw, err := io.ReadAll(capped.Reader(r, capped.Bundle, "bundle"))
	if err != nil {
		return nil, err
	}
	return Decode(raw)
}

// Decode is Read of a file already read whole.
func Decode(raw []byte) (*File, error) {
	var top struct {
		Version   int             `json:"version"`
		Kind      Kind            `json:"kind"`
		Snapshots json.RawMessage `json:"snapshots"`
	}
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, err
	}
	kind := top.Kind
	if kind == "" && top.Snapshots != nil {
		kind = KindNamespace // written before bundles said their kind
	}
	if kind != KindNamespace && kind != KindRun || top.Version < 1 || top.Version > BundleVersion {
		return nil, &FileError{Version: top.Version, Kind: kind}
	}
	f := &File{Version: top.Version, Kind: kind}
	var err error
	if kind == KindNamespace {
		f.Bundle, err = readNamespace(raw)
	} else {
		f.Run, err = readRun(raw, top.Version)
	}
	if err != nil {
		return nil, err
	}
	return f, nil
}

// readNamespace decodes a namespace bundle.
func readNamespace(raw []byte) (*Bundle, error) {
	var b Bundle
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, err
	}
	if len(b.Snapshots) == 0 {
		return nil, ErrNoSnapshots
	}
	return &b, nil
}

// readRun decodes a run bundle: its load's status classes of version 1
// ("status"), and each side sharing the other's namespace given that
// one's snapshots back.
func readRun(raw []byte, version int) (*Run, error) {
	var run Run
	if err := json.Unmarshal(raw, &run); err != nil {
		return nil, err
	}
	if run.Load == nil {
		return nil, errors.New("run bundle without a load result")
	}
	if version == 1 && run.Load.Status == nil {
		var v1 struct {
			Load json.RawMessage `json:"load"`
		}
		if json.Unmarshal(raw, &v1) == nil {
			run.Load.Status = load.StatusV1(v1.Load)
		}
	}
	for _, s := range run.Sides {
		if s == nil {
			return nil, errors.New("run bundle with an empty side")
		}
	}
	for _, s := range run.Sides {
		if s.SameAs == "" {
			continue
		}
		for _, o := range run.Sides {
			if o.Name == s.SameAs && o.SameAs == "" {
				s.Bundle = o.Bundle
			}
		}
	}
	for _, s := range run.Sides {
		s.Observed = s.Bundle != nil && len(s.Bundle.Snapshots) > 0
	}
	return &run, nil
}
