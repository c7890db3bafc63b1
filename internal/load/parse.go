package load

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// ErrMalformed reports a response that is not valid HTTP/1.1.
var ErrMalformed = errors.New("malformed HTTP response")

// ErrTruncated reports a connection closed before the response ended.
var ErrTruncated = errors.New("connection closed mid-response")

// maxHeadBytes bounds the status lines and headers of one response,
// interim responses included, and separately its chunked trailer.
const maxHeadBytes = 64 << 10

// These errors are preallocated because they can happen on every
// connection, not only on broken ones.
var (
	errHeadersTooLarge = fmt.Errorf("%w: headers too large", ErrMalformed)
	errClosedIdle      = fmt.Errorf("%w: before the first byte", ErrTruncated)
)

// parseState is where respParser is inside a response.
type parseState uint8

const (
	stStatus      parseState = iota // Expecting a status line.
	stHeader                        // Reading header lines.
	stBodyLen                       // Counting a Content-Length body.
	stBodyEOF                       // Counting a body delimited by close.
	stChunkSize                     // Reading the hex digits of a chunk size.
	stChunkSizeWS                   // Skipping whitespace after a chunk size.
	stChunkExt                      // Skipping a chunk extension up to LF.
	stChunkSizeLF                   // Expecting the LF after a chunk-size CR.
	stChunkData                     // Counting chunk data.
	stChunkDataCR                   // Expecting the CRLF after chunk data.
	stChunkDataLF                   // Expecting the LF after chunk data and CR.
	stTrailer                       // Reading trailer lines.
	stDone                          // The response is complete.
	stFailed                        // The response is malformed or truncated.
)

// respParser is an incremental HTTP/1.1 response parser. It scans bytes
// in place and never copies a body; only a header line split across two
// feed calls is copied, into line. One parser serves every response of a
// connection: call reset before each. The zero value is not ready for
// use; call newRespParser.
type respParser struct {
	state parseState
	head  bool // The request was HEAD.
	begun bool // A byte of this response was fed.
	line  []byte
	// headBytes counts the bytes of the head, or of the trailer once in
	// the chunked trailer, to enforce maxHeadBytes.
	headBytes int

	// These describe the current (possibly interim) response head.
	code          int
	http10        bool
	clSeen        bool
	cl            int64
	teSeen        bool
	chunked       bool
	connClose     bool
	connKeepAlive bool

	remain int64 // Bytes left in a Content-Length body, or in a chunk.
	digits int   // Hex digits read of the current chunk size.
	body   int64
	ka     bool
	err    error
	// capt, if set, keeps the headers and body for a script's response().
	capt *captured
}

// captured is a response's headers and body, for a script's response():
// spans index arena as name start, name end, value start, value end.
type captured struct {
	arena []byte
	spans [][4]int
	body  []byte
	// What response() reads (scanArg): the rest is not copied.
	keepHeaders, keepBody bool
}

func (c *captured) reset() {
	c.arena, c.spans, c.body = c.arena[:0], c.spans[:0], c.body[:0]
}

// newRespParser returns a parser ready for a response to a non-HEAD
// request.
func newRespParser() *respParser {
	p := &respParser{line: make([]byte, 0, 512)}
	p.reset(false)
	return p
}

// reset prepares for the next response. head is true when the request was
// HEAD (no body follows whatever the headers say).
func (p *respParser) reset(head bool) {
	*p = respParser{line: p.line[:0], head: head, capt: p.capt}
	if p.capt != nil {
		p.capt.reset()
	}
}

// status returns the status code of the final response.
func (p *respParser) status() int { return p.code }

// keepAlive reports whether the connection may carry another request. It
// is false when the server said Connection: close, for HTTP/1.0 without
// Connection: keep-alive, for a body delimited by close, and after 101
// Switching Protocols, since the connection no longer speaks HTTP.
func (p *respParser) keepAlive() bool { return p.ka }

// bodyBytes returns the number of body bytes, excluding chunk framing.
func (p *respParser) bodyBytes() int64 { return p.body }

// started reports whether at least one byte of the current response was
// fed.
func (p *respParser) started() bool { return p.begun }

// feed consumes bytes of the response from b. It returns how many bytes it
// consumed and whether the response is complete. Bytes after a complete
// response are not consumed (n < len(b)); the caller decides what they
// mean. Once done or after an error, further feed calls are the caller's
// bug; after an error they return the same error.
func (p *respParser) feed(b []byte) (n int, done bool, err error) {
	if p.state == stFailed {
		return 0, false, p.err
	}
	if len(b) > 0 {
		p.begun = true
	}
	for n < len(b) && p.state != stDone {
		var k int
		switch p.state {
		case stStatus, stHeader, stTrailer:
			k, err = p.feedLines(b[n:])
		case stBodyLen, stChunkData:
			k = p.feedCounted(b[n:])
		case stBodyEOF:
			k = len(b) - n
			p.body += int64(k)
			if p.capt != nil && p.capt.keepBody {
				p.capt.body = append(p.capt.body, b[n:]...)
			}
		default:
			k, err = p.feedChunkFraming(b[n:])
		}
		n += k
		if err != nil {
			p.state, p.err = stFailed, err
			return n, false, err
		}
	}
	return n, p.state == stDone, nil
}

// eof tells the parser the peer closed the connection. A response
// delimited by close completes; anything else mid-response is
// ErrTruncated, as is a close before any byte of a response, which the
// caller treats as a closed keep-alive connection.
func (p *respParser) eof() (done bool, err error) {
	switch p.state {
	case stDone:
		return true, nil
	case stBodyEOF:
		p.state = stDone
		return true, nil
	case stFailed:
		return false, p.err
	}
	if !p.begun {
		err = errClosedIdle
	} else {
		switch p.state {
		case stStatus, stHeader:
			err = fmt.Errorf("%w: in headers after %d bytes", ErrTruncated, p.headBytes)
		case stBodyLen:
			err = fmt.Errorf("%w: body has %d of %d bytes", ErrTruncated, p.body, p.cl)
		case stTrailer:
			err = fmt.Errorf("%w: in chunked trailer", ErrTruncated)
		default:
			err = fmt.Errorf("%w: in chunked body after %d bytes", ErrTruncated, p.body)
		}
	}
	p.state, p.err = stFailed, err
	return false, err
}

// feedCounted counts body bytes of a Content-Length body or of a chunk.
func (p *respParser) feedCounted(b []byte) int {
	k := len(b)
	if int64(k) > p.remain {
		k = int(p.remain)
	}
	p.remain -= int64(k)
	p.body += int64(k)
	if p.capt != nil && p.capt.keepBody {
		p.capt.body = append(p.capt.body, b[:k]...)
	}
	if p.remain == 0 {
		if p.state == stBodyLen {
			p.state = stDone
		} else {
			p.state = stChunkDataCR
		}
	}
	return k
}

// feedLines consumes the lines of a head or trailer. Complete lines are
// parsed in place from b; a line split across calls is copied into
// p.line. It returns when b is used up or the lines have ended.
func (p *respParser) feedLines(b []byte) (int, error) {
	off := 0
	for off < len(b) {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			if err := p.countHead(len(b) - off); err != nil {
				return off, err
			}
			p.line = append(p.line, b[off:]...)
			return len(b), nil
		}
		if err := p.countHead(i + 1); err != nil {
			return off, err
		}
		line := b[off : off+i+1]
		off += i + 1
		if len(p.line) > 0 {
			p.line = append(p.line, line...)
			line = p.line
		}
		err := p.onLine(trimEOL(line))
		p.line = p.line[:0]
		if err != nil {
			return off, err
		}
		if p.state != stStatus && p.state != stHeader && p.state != stTrailer {
			break
		}
	}
	return off, nil
}

// countHead adds k bytes to the head size and enforces its limit.
func (p *respParser) countHead(k int) error {
	p.headBytes += k
	if p.headBytes > maxHeadBytes {
		return errHeadersTooLarge
	}
	return nil
}

// onLine handles one head or trailer line without its line ending.
func (p *respParser) onLine(line []byte) error {
	switch {
	case p.state == stStatus:
		return p.parseStatus(line)
	case len(line) > 0:
		return p.parseHeader(line)
	case p.state == stHeader:
		p.endHead()
		return nil
	default: // The blank line ending the trailer.
		p.state = stDone
		return nil
	}
}

// parseStatus parses "HTTP/1.x SSS reason", where the reason may be
// absent along with the space before it.
func (p *respParser) parseStatus(line []byte) error {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || !isDigit(line[7]) ||
		line[8] != ' ' || (len(line) > 12 && line[12] != ' ') {
		return fmt.Errorf("%w: bad status line %.40q", ErrMalformed, line)
	}
	code := 0
	for _, c := range line[9:12] {
		if !isDigit(c) {
			return fmt.Errorf("%w: bad status code %q", ErrMalformed, line[9:12])
		}
		code = code*10 + int(c-'0')
	}
	if code < 100 {
		return fmt.Errorf("%w: bad status code %q", ErrMalformed, line[9:12])
	}
	p.code = code
	p.http10 = line[7] == '0'
	p.state = stHeader
	return nil
}

// parseHeader parses a "Name: value" line of a head or trailer and, in a
// head, notes the headers that frame the body.
func (p *respParser) parseHeader(line []byte) error {
	// One loop finds the colon and checks the name, which is shorter
	// than a call to bytes.IndexByte for typical names.
	i := 0
	for i < len(line) && isTokenByte[line[i]] {
		i++
	}
	if i == len(line) || line[i] != ':' {
		switch {
		case line[0] == ' ' || line[0] == '\t':
			return fmt.Errorf("%w: obsolete line folding %.40q", ErrMalformed, line)
		case bytes.IndexByte(line, ':') < 0:
			return fmt.Errorf("%w: header line without colon %.40q", ErrMalformed, line)
		}
		return fmt.Errorf("%w: bad header name %.40q", ErrMalformed, line)
	}
	if i == 0 {
		return fmt.Errorf("%w: empty header name", ErrMalformed)
	}
	if p.state == stTrailer {
		return nil // Trailers cannot change the framing.
	}
	name := line[:i]
	if c := p.capt; c != nil && c.keepHeaders {
		v := trimOWS(line[i+1:])
		s := len(c.arena)
		c.arena = append(append(c.arena, name...), v...)
		c.spans = append(c.spans, [4]int{s, s + len(name), s + len(name), len(c.arena)})
	}
	switch {
	case tokenEqualFold(name, "content-length"):
		return p.contentLength(trimOWS(line[i+1:]))
	case tokenEqualFold(name, "transfer-encoding"):
		p.transferEncoding(line[i+1:])
	case tokenEqualFold(name, "connection"):
		for v := line[i+1:]; len(v) > 0; {
			var tok []byte
			tok, v = nextElement(v)
			p.connClose = p.connClose || bytes.EqualFold(tok, []byte("close"))
			p.connKeepAlive = p.connKeepAlive || bytes.EqualFold(tok, []byte("keep-alive"))
		}
	}
	return nil
}

// tokenEqualFold reports whether the header name tok equals lower, which
// is in lower case, ignoring case. Setting bit 0x20 lowers ASCII letters
// and maps no other token byte onto a letter or a hyphen, so this is
// exact for tokens.
func tokenEqualFold(tok []byte, lower string) bool {
	if len(tok) != len(lower) {
		return false
	}
	for i := range len(tok) {
		if tok[i]|0x20 != lower[i] {
			return false
		}
	}
	return true
}

// contentLength parses a Content-Length value. Like Go's net/http it
// accepts repeated headers only when they agree; unlike it, it rejects an
// invalid value even when the status or method means no body follows.
func (p *respParser) contentLength(v []byte) error {
	if len(v) == 0 {
		return fmt.Errorf("%w: empty content-length", ErrMalformed)
	}
	var n int64
	for _, c := range v {
		if !isDigit(c) || n > (math.MaxInt64-int64(c-'0'))/10 {
			return fmt.Errorf("%w: bad content-length %.40q", ErrMalformed, v)
		}
		n = n*10 + int64(c-'0')
	}
	if p.clSeen && n != p.cl {
		return fmt.Errorf("%w: conflicting content-length %d and %d", ErrMalformed, p.cl, n)
	}
	p.clSeen, p.cl = true, n
	return nil
}

// transferEncoding notes whether chunked is the final transfer coding. A
// later header overrides an earlier one, as its codings come after.
func (p *respParser) transferEncoding(v []byte) {
	var last []byte
	for len(v) > 0 {
		var tok []byte
		tok, v = nextElement(v)
		if len(tok) > 0 {
			last = tok
		}
	}
	if last != nil {
		p.teSeen = true
		p.chunked = bytes.EqualFold(last, []byte("chunked"))
	}
}

// endHead acts on the blank line after the headers: it skips an interim
// response or decides how the body of the final one is delimited.
func (p *respParser) endHead() {
	if p.code < 200 && p.code != 101 {
		// Interim responses are skipped with their headers; headBytes
		// still counts them so that a flood of them hits the limit.
		*p = respParser{line: p.line, head: p.head, begun: true, headBytes: p.headBytes, capt: p.capt}
		if p.capt != nil {
			p.capt.reset()
		}
		return
	}
	p.ka = !p.connClose && (!p.http10 || p.connKeepAlive)
	// Like Go's net/http, ignore Transfer-Encoding in HTTP/1.0, which
	// does not define it.
	te := p.teSeen && !p.http10
	switch {
	case p.code == 101:
		p.ka = false
		p.state = stDone
	case p.head || p.code == 204 || p.code == 304:
		p.state = stDone
	case te && p.chunked:
		p.state = stChunkSize
	case te:
		// RFC 9112 section 6.3: a final coding other than chunked means
		// the body lasts until the server closes.
		p.state, p.ka = stBodyEOF, false
	case p.clSeen && p.cl == 0:
		p.state = stDone
	case p.clSeen:
		p.state, p.remain = stBodyLen, p.cl
	default:
		p.state, p.ka = stBodyEOF, false
	}
}

// feedChunkFraming consumes a chunk-size line or the CRLF after chunk
// data, byte by byte, since both are a few bytes long. It returns as soon
// as the state leaves the framing states.
func (p *respParser) feedChunkFraming(b []byte) (int, error) {
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch p.state {
		case stChunkSize:
			if d := unhex(c); d >= 0 {
				if p.remain>>59 != 0 {
					return i, fmt.Errorf("%w: chunk size overflow", ErrMalformed)
				}
				p.remain = p.remain<<4 | int64(d)
				p.digits++
				continue
			}
			if p.digits == 0 {
				return i, fmt.Errorf("%w: bad chunk size byte %q", ErrMalformed, c)
			}
			fallthrough
		case stChunkSizeWS:
			switch c {
			case ' ', '\t':
				p.state = stChunkSizeWS
			case ';':
				p.state = stChunkExt
			case '\r':
				p.state = stChunkSizeLF
			case '\n':
				p.endChunkSize()
				return i + 1, nil
			default:
				return i, fmt.Errorf("%w: bad byte %q after chunk size", ErrMalformed, c)
			}
		case stChunkExt:
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				return len(b), nil
			}
			p.endChunkSize()
			return i + j + 1, nil
		case stChunkSizeLF, stChunkDataLF:
			if c != '\n' {
				return i, fmt.Errorf("%w: CR without LF in chunk framing", ErrMalformed)
			}
			if p.state == stChunkSizeLF {
				p.endChunkSize()
				return i + 1, nil
			}
			p.state, p.remain, p.digits = stChunkSize, 0, 0
		case stChunkDataCR:
			switch c {
			case '\r':
				p.state = stChunkDataLF
			case '\n':
				p.state, p.remain, p.digits = stChunkSize, 0, 0
			default:
				return i, fmt.Errorf("%w: chunk data longer than its size", ErrMalformed)
			}
		}
	}
	return len(b), nil
}

// endChunkSize acts on the end of a chunk-size line: data follows, or the
// trailer after the last chunk.
func (p *respParser) endChunkSize() {
	if p.remain > 0 {
		p.state = stChunkData
		return
	}
	p.state, p.headBytes = stTrailer, 0
}

// trimEOL removes a trailing LF or CRLF.
func trimEOL(b []byte) []byte {
	b = b[:len(b)-1]
	if len(b) > 0 && b[len(b)-1] == '\r' {
		b = b[:len(b)-1]
	}
	return b
}

// trimOWS removes leading and trailing spaces and tabs.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// nextElement splits the first element off a comma-separated list and
// trims it.
func nextElement(v []byte) (elem, rest []byte) {
	if i := bytes.IndexByte(v, ','); i >= 0 {
		return trimOWS(v[:i]), v[i+1:]
	}
	return trimOWS(v), nil
}

// isDigit reports whether c is an ASCII decimal digit.
func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// unhex returns the value of a hex digit, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// isTokenByte reports the bytes allowed in a header name (RFC 9110
// section 5.6.2).
var isTokenByte = func() (t [256]bool) {
	for c := '0'; c <= '9'; c++ {
		t[c] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		t[c], t[c-'a'+'A'] = true, true
	}
	for _, c := range "!#$%&'*+-.^_`|~" {
		t[c] = true
	}
	return t
}()
