package capped

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	b, err := io.ReadAll(Reader(strings.NewReader("12345"), 5, "plan"))
	if err != nil || string(b) != "12345" {
		t.Fatalf("at the cap: %q %v", b, err)
	}
	_, err = io.ReadAll(Reader(strings.NewReader("123456"), 5, "plan"))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "plan larger than") {
		t.Fatalf("past the cap: %v", err)
	}
}

// TestGzipBomb: a few KiB that decompress to 64 MiB stop at the cap,
// having decompressed little more than it.
func TestGzipBomb(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(bytes.Repeat([]byte{'['}, 64<<20))
	w.Close()
	r, err := gzip.NewReader(&z)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, Reader(r, 1<<20, "bundle"))
	if !errors.Is(err, ErrTooLarge) || n != 1<<20 {
		t.Fatalf("%d bytes, %v", n, err)
	}
}

// TestDecompressed: a gzip'd document is sniffed through the cap: a
// JSON decoder reading the kind of a bomb's document stops at the cap,
// as the read of the whole does; a plain file is capped alike, and a
// stream cut short says so.
func TestDecompressed(t *testing.T) {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write([]byte(`{"kind": "namespace", "snapshots": "`))
	w.Write(bytes.Repeat([]byte{'a'}, 16<<20))
	w.Write([]byte(`"}`))
	w.Close()
	r, err := Decompressed(bytes.NewReader(z.Bytes()), 1<<20, "bundle.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Kind string }
	if err := json.NewDecoder(r).Decode(&doc); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "bundle.json.gz larger than 1 MiB") {
		t.Errorf("sniffing a bomb: %v", err)
	}
	r, _ = Decompressed(strings.NewReader(`{"kind": "run"}`), 1<<20, "plain")
	if err := json.NewDecoder(r).Decode(&doc); err != nil || doc.Kind != "run" {
		t.Errorf("plain: %+v %v", doc, err)
	}
	r, _ = Decompressed(bytes.NewReader(z.Bytes()[:z.Len()/2]), 64<<20, "cut")
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, ErrTruncated) {
		t.Errorf("a stream cut short: %v", err)
	}
}
