// Package capped bounds what netdoctor reads of a file a user hands it
// (a report, a plan, a bundle, gzip'd or not): a small gzip bomb must end
// in a one-line error, not in all of the host's memory.
package capped

import (
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
)

// ErrTooLarge is wrapped by the error of a read past the cap.
var ErrTooLarge = errors.New("too large")

// What netdoctor reads at most of each kind of file, decompressed: far
// above any it writes (a run bundle is about 1 MiB, an agent's whole
// window at most 48 MiB compressed).
const (
	Plan   = 64 << 20
	Report = 256 << 20
	Bundle = 512 << 20
)

// Reader reads r up to max bytes; a read past them fails with an error
// wrapping ErrTooLarge that names what was read and the cap.
func Reader(r io.Reader, max int64, what string) io.Reader {
	return &reader{r: r, left: max, max: max, what: what}
}

type reader struct {
	r         io.Reader
	left, max int64
	what      string
}

func (c *reader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more says whether the input ends exactly at the cap.
		var b [1]byte
		if n, err := c.r.Read(b[:]); n > 0 {
			return 0, fmt.Errorf("%s larger than %d MiB: %w", c.what, c.max>>20, ErrTooLarge)
		} else if err != nil {
			return 0, err
		}
		return 0, nil
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// ErrTruncated is the error of a gzip stream that ends before its end.
var ErrTruncated = errors.New("truncated: the gzip stream ends before its end (a copy or a write cut short?)")

// Decompressed reads r, decompressed when it is gzip'd (whatever its
// name says), capped at max bytes of what it holds: the one reader of
// what a user hands netdoctor, so that no decoder, a sniff of the
// document's kind included, sees more than the cap of a gzip bomb. A
// stream cut short reads as ErrTruncated.
func Decompressed(r io.Reader, max int64, what string) (io.Reader, error) {
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, err
		}
		return Reader(gzipReader{z}, max, what), nil
	}
	return Reader(br, max, what), nil
}

// gzipReader words a stream cut short.
type gzipReader struct{ r io.Reader }

func (g gzipReader) Read(p []byte) (int, error) {
	n, err := g.r.Read(p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = ErrTruncated
	}
	return n, err
}
