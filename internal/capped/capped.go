// Package capped bounds what netdoctor reads of a file a user hands it
// (a report, a plan, a bundle, gzip'd or not): a small gzip bomb must end
// in a one-line error, not in all of the host's memory.
package capped

import (
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
