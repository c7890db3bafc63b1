package report

import (
	"fmt"
	"io"
)

// Printer writes formatted text until the first error and keeps that
// error: a renderer, or a command's own lines, prints line after line
// and asks once, at the end, whether the writer took all of them (Err).
// It is the one such writer: the reports' renderers, the lab's and the
// commands' text all print through it.
type Printer struct {
	w   io.Writer
	err error
}

// NewPrinter prints to w.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: w} }

// F writes like fmt.Fprintf, unless an earlier write failed.
func (p *Printer) F(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// Err is the first write's error, nil when every write succeeded.
func (p *Printer) Err() error { return p.err }
