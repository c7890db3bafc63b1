package capped

import (
	"bytes"
	"compress/gzip"
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
