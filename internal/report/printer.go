package report

import (
	"errors"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Printer writes formatted text until the first error and keeps that
// error: a renderer, or a command's own lines, prints line after line
// and asks once, at the end, whether the writer took all of them (Err).
// It is the one such writer: the reports' renderers, the lab's and the
// commands' text all print through it.
//
// What it prints goes through the one sanitiser (internal/printable):
// the lines through its Writer (no byte a terminal acts on gets out),
// and each text argument of F as a value (printable.String: a line
// break or tab in a process's name, a symbol, a finding's words cannot
// forge a line or a column of the report). The format is netdoctor's
// own and keeps its line breaks.
type Printer struct {
	w   io.Writer
	err error
}

// NewPrinter prints to w.
func NewPrinter(w io.Writer) *Printer { return &Printer{w: printable.NewWriter(w)} }

// F writes like fmt.Fprintf, unless an earlier write failed; its text
// arguments are escaped as values.
func (p *Printer) F(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, values(args)...)
	}
}

// values escapes the text among args (strings, errors, Stringers,
// lists of strings) as printable.String does; numbers and durations are
// left to fmt.
func values(args []any) []any {
	var out []any
	for i, a := range args {
		var v any
		switch x := a.(type) {
		case string:
			if e := printable.String(x); e != x {
				v = e
			}
		case []string:
			for j, s := range x {
				if e := printable.String(s); e != s {
					if v == nil {
						v = append([]string(nil), x...)
					}
					v.([]string)[j] = e
				}
			}
		case error:
			if t := x.Error(); printable.String(t) != t {
				v = errors.New(printable.String(t))
			}
		case fmt.Stringer:
			if t := x.String(); printable.String(t) != t {
				v = printable.String(t)
			}
		}
		if v == nil {
			continue
		}
		if out == nil {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	if out == nil {
		return args
	}
	return out
}

// Err is the first write's error, nil when every write succeeded.
func (p *Printer) Err() error { return p.err }
