// Package printable is the one sanitiser of what came from outside
// netdoctor (a process's name, a symbol of another user's binary, a
// cgroup path, an interface name of another namespace, a log line, a
// configuration's value) on its way to a terminal, a text report or a log:
// a process may name itself "\x1b]0;PWNED\x07\x1b[8m", which a terminal
// would obey (set its title, hide what follows). Such bytes are shown
// escaped instead, so that the text stays recognisable and nothing in it
// acts on the terminal.
//
// String is for one value printed as a field (every control character
// escaped, line breaks and tabs included: a value cannot forge a line of
// the report); NewWriter for a whole text report or log, whose own line
// breaks and tabs are kept. JSON and HTML keep their own escaping and
// never go through here.
package printable

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// escaped reports whether r is shown escaped: the C0 controls, DEL, the
// C1 controls (a terminal may take U+009B for CSI), and the formatting
// characters that reorder or hide the text around them (bidirectional
// overrides and isolates, as in "Trojan source"). Tab and line feed are
// the caller's choice (keep).
func escaped(r rune, keep bool) bool {
	switch {
	case r == '\t' || r == '\n':
		return !keep
	case r < 0x20, r == 0x7f, r >= 0x80 && r < 0xa0:
		return true
	case r == 0x061c, r == 0x200e, r == 0x200f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}

// appendEscape writes r as Go writes it in a string: \n, \t, \r, \x1b,
// \u202e; a byte that is no UTF-8 as \xff.
func appendEscape(b []byte, r rune, invalid byte, isInvalid bool) []byte {
	const hex = "0123456789abcdef"
	switch {
	case isInvalid:
		return append(b, '\\', 'x', hex[invalid>>4], hex[invalid&0xf])
	case r == '\n':
		return append(b, '\\', 'n')
	case r == '\t':
		return append(b, '\\', 't')
	case r == '\r':
		return append(b, '\\', 'r')
	case r < 0x80:
		return append(b, '\\', 'x', hex[r>>4], hex[r&0xf])
	}
	b = append(b, '\\', 'u')
	s := strconv.FormatInt(int64(r), 16)
	for range 4 - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// clean reports whether s needs no escaping: the common case costs a
// scan and no allocation.
func clean(s string, keep bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x80 {
			return cleanFrom(s[i:], keep)
		}
		if c < 0x20 || c == 0x7f {
			if keep && (c == '\t' || c == '\n') {
				continue
			}
			return false
		}
	}
	return true
}

func cleanFrom(s string, keep bool) bool {
	for i, r := range s {
		if r == utf8.RuneError {
			if _, n := utf8.DecodeRuneInString(s[i:]); n == 1 {
				return false
			}
		}
		if escaped(r, keep) {
			return false
		}
	}
	return true
}

// String is s with every control character, line breaks and tabs
// included, and every byte that is not UTF-8 shown escaped ("\x1b",
// "\n", "\xff"): one value printed as a field of a text line.
func String(s string) string {
	if clean(s, false) {
		return s
	}
	return string(appendString(make([]byte, 0, len(s)+16), s, false))
}

// Text is s escaped as String does, but for its line breaks and tabs: a
// block of text of its own (a log line's context, a message).
func Text(s string) string {
	if clean(s, true) {
		return s
	}
	return string(appendString(make([]byte, 0, len(s)+16), s, true))
}

func appendString(b []byte, s string, keep bool) []byte {
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = appendEscape(b, 0, s[i], true)
		case escaped(r, keep):
			b = appendEscape(b, r, 0, false)
		default:
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return b
}

// Writer escapes what is written through it as Text does: a text report
// or log whose own line breaks and tabs are kept. Each write is escaped
// on its own: the renderers write whole strings (fmt's one write per
// call, tabwriter's cells), never half a UTF-8 sequence.
type Writer struct {
	w   io.Writer
	buf []byte
}

// NewWriter writes to w through the sanitiser; w that already is one is
// returned as it is, so that a renderer called by another escapes once.
func NewWriter(w io.Writer) *Writer {
	if pw, ok := w.(*Writer); ok {
		return pw
	}
	return &Writer{w: w}
}

// Write implements io.Writer: it returns len(p) when everything was
// written (escaped), as a writer of text is expected to.
func (pw *Writer) Write(p []byte) (int, error) {
	out := p
	if !clean(string(p), true) {
		pw.buf = appendString(pw.buf[:0], string(p), true)
		out = pw.buf
	}
	if _, err := pw.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Raw is the writer under w when w is a Writer, else w: for the few
// writers that must send a terminal their own control sequences (the
// progress line's "\r\033[K"), never text from outside.
func Raw(w io.Writer) io.Writer {
	if pw, ok := w.(*Writer); ok {
		return pw.w
	}
	return w
}
