package nginx

import (
	"bytes"
	"fmt"
)

// stmtEnd says how a statement ended.
type stmtEnd int

const (
	endSemicolon stmtEnd = iota // "name args;"
	endBlock                    // "name args {"
	endClose                    // "}"
	endFile                     // end of the input, between statements
)

// stmt is one statement read by scanner.next.
type stmt struct {
	words []string
	line  int // the line of the first word
	end   stmtEnd
}

// scanner splits nginx configuration text into statements exactly as
// ngx_conf_read_token does (src/core/ngx_conf_file.c), surprises
// included: "#" starts a comment only where a word could start, "}" ends
// a block only there too, so "${var}" and "a}" are words, a quoted word
// must be followed by a space, ";", "{" or ")", and backslash escapes
// apply inside and outside quotes.
type scanner struct {
	src  []byte
	pos  int
	line int
}

func newScanner(src []byte) *scanner { return &scanner{src: src, line: 1} }

// syntaxError is an error of nginx's tokenizer, at a line of the input.
type syntaxError struct {
	line int
	msg  string
}

// next returns the next statement. An error leaves the scanner where it
// stopped; the caller must not call next again.
func (s *scanner) next() (stmt, *syntaxError) {
	var (
		st                         = stmt{line: s.line}
		words                      []string
		start                      int
		lastSpace                  = true
		needSpace, sharp, variable bool
		quoted, sQuoted, dQuoted   bool
	)
	unexpected := func(c byte) *syntaxError { return &syntaxError{s.line, fmt.Sprintf("unexpected %q", c)} }
	for {
		if s.pos >= len(s.src) {
			if len(words) > 0 || !lastSpace {
				// In a dump this means the dump was truncated.
				return st, &syntaxError{s.line, `unexpected end of file, expecting ";" or "}"`}
			}
			st.end = endFile
			return st, nil
		}
		ch := s.src[s.pos]
		s.pos++
		if ch == '\n' {
			s.line++
			sharp = false
		}
		if sharp {
			continue
		}
		if quoted {
			quoted = false
			continue
		}
		if needSpace {
			switch {
			case isSpace(ch):
				lastSpace, needSpace = true, false
				continue
			case ch == ';':
				st.words, st.end = words, endSemicolon
				return st, nil
			case ch == '{':
				st.words, st.end = words, endBlock
				return st, nil
			case ch == ')':
				// "if ($a = "b")": the ")" becomes a word of its own.
				lastSpace, needSpace = true, false
			default:
				return st, unexpected(ch)
			}
		}
		if lastSpace {
			start = s.pos - 1
			if isSpace(ch) {
				continue
			}
			switch ch {
			case ';', '{':
				if len(words) == 0 {
					return st, unexpected(ch)
				}
				st.words, st.end = words, endSemicolon
				if ch == '{' {
					st.end = endBlock
				}
				return st, nil
			case '}':
				if len(words) != 0 {
					return st, unexpected(ch)
				}
				st.end = endClose
				return st, nil
			case '#':
				sharp = true
				continue
			case '"':
				start++
				dQuoted = true
			case '\'':
				start++
				sQuoted = true
			case '\\':
				quoted = true
			case '$':
				variable = true
			}
			lastSpace = false
			if len(words) == 0 {
				st.line = s.line
			}
			continue
		}
		if ch == '{' && variable {
			continue
		}
		variable = false
		switch {
		case ch == '\\':
			quoted = true
			continue
		case ch == '$':
			variable = true
			continue
		}
		found := false
		switch {
		case dQuoted:
			if ch == '"' {
				dQuoted, needSpace, found = false, true, true
			}
		case sQuoted:
			if ch == '\'' {
				sQuoted, needSpace, found = false, true, true
			}
		case isSpace(ch) || ch == ';' || ch == '{':
			lastSpace, found = true, true
		}
		if !found {
			continue
		}
		words = append(words, unescape(s.src[start:s.pos-1]))
		switch ch {
		case ';':
			st.words, st.end = words, endSemicolon
			return st, nil
		case '{':
			st.words, st.end = words, endBlock
			return st, nil
		}
	}
}

// unescape undoes the escapes nginx knows, \" \' \\ \t \r \n, and keeps
// any other backslash, as nginx does.
func unescape(b []byte) string {
	if bytes.IndexByte(b, '\\') < 0 {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] == '\\' && i+1 < len(b) {
			switch b[i+1] {
			case '"', '\'', '\\':
				i++
			case 't':
				out = append(out, '\t')
				i++
				continue
			case 'r':
				out = append(out, '\r')
				i++
				continue
			case 'n':
				out = append(out, '\n')
				i++
				continue
			}
		}
		out = append(out, b[i])
	}
	return string(out)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }
