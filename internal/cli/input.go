package cli

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// docKind is what a file a user handed netdoctor is, from its top-level
// fields, so that the wrong file is told what it is and what reads it,
// in one line, rather than in a decoder's words.
type docKind struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`    // a bundle's (evidence.Kind)
	Command string `json:"command"` // a report's command
	// A bundle has snapshots; a plan has changes and the report it came
	// from; a journal its entries.
	Snapshots json.RawMessage `json:"snapshots"`
	Changes   json.RawMessage `json:"changes"`
	Report    json.RawMessage `json:"report"`
	Entries   json.RawMessage `json:"entries"`
}

// what names the document in words: "a netdoctor check report"; "" for
// none netdoctor writes.
func (d docKind) what() string {
	switch {
	case d.Kind == string(evidence.KindRun):
		return "a netdoctor run bundle"
	case d.Kind == string(evidence.KindNamespace):
		return "a netdoctor bundle"
	case d.Changes != nil && d.Report != nil:
		return "a netdoctor tune plan"
	case d.Entries != nil:
		return "a netdoctor tune journal"
	case d.Snapshots != nil:
		return "a netdoctor bundle"
	case d.Command != "":
		return "a netdoctor " + d.Command + " report"
	}
	return ""
}

// sniffFile reads what the file at path is, decompressed; the error is
// one line saying what is wrong with the file.
func sniffFile(path string) (docKind, error) {
	var d docKind
	f, err := openData(path)
	if err != nil {
		return d, badInput("read %s: %v", path, dataError(err))
	}
	defer f.Close()
	if err := json.NewDecoder(f).Decode(&d); err != nil {
		return d, badInput("read %s: %v", path, dataError(err))
	}
	return d, nil
}

// errTruncatedGzip is a gzip stream that ends before its end.
var errTruncatedGzip = capped.ErrTruncated

// dataError words an error reading a file a user named: its compression
// cut short, its JSON broken or of another shape. A decoder's own words
// (Go's type names) say nothing to a user.
func dataError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, errTruncatedGzip):
		return errTruncatedGzip
	case errors.Is(err, gzip.ErrChecksum):
		return errors.New("damaged: the gzip stream's checksum does not match its content")
	case errors.Is(err, gzip.ErrHeader):
		return errors.New("damaged: not gzip data, though it starts as gzip does")
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.As(err, &syn) && syn.Error() == "unexpected end of JSON input":
		return errors.New("truncated: the JSON ends before its end (a copy or a write cut short?)")
	case errors.As(err, &syn):
		return fmt.Errorf("not JSON (%v, at byte %d)", err, syn.Offset)
	case errors.As(err, &typ) && typ.Field == "":
		return fmt.Errorf("a JSON %s, not an object as netdoctor writes", typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("field %q holds a JSON %s, not what netdoctor writes there", typ.Field, typ.Value)
	}
	return err
}

// What reads what, for a file that is not what a command reads.
const (
	bundleHint = "diagnose reads bundles (collect --out, run --bundle, an agent's incidents); compare and tune plan read reports"
	reportHint = "compare and tune plan read reports (check, run or diagnose --json; compare also load --json); diagnose reads bundles"
)

// notA says that a file is not what a command reads, what it is, and
// what reads what: "x.json is a netdoctor check report, not a bundle:
// diagnose reads bundles (…)".
func notA(path string, d docKind, want, hint string) error {
	if w := d.what(); w != "" {
		return badInput("%s is %s, not %s: %s", path, w, want, hint)
	}
	return badInput("%s is JSON but not %s (it has none of netdoctor's fields): %s", path, want, hint)
}

// readReportError words the error of reading a report for one line: a
// newer version, or a file of another kind.
func readReportError(path string, err error) error {
	var k *report.KindError
	if !errors.As(err, &k) {
		return badInput("read report %s: %v", path, dataError(err))
	}
	if k.Command != "" && k.Version > report.Version {
		return badInput("read report %s: %v", path, k)
	}
	d, serr := sniffFile(path)
	if serr != nil {
		return serr
	}
	return notA(path, d, "a report", reportHint)
}
