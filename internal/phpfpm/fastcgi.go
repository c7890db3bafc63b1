package phpfpm

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// FastCGI 1.0 as php-fpm speaks it. See
// https://fastcgi-archives.github.io/FastCGI_Specification.html and
// main/fastcgi.h in php-src.
const (
	fcgiVersion1 = 1

	fcgiBeginRequest = 1
	fcgiEndRequest   = 3
	fcgiParams       = 4
	fcgiStdin        = 5
	fcgiStdout       = 6
	fcgiStderr       = 7

	fcgiResponder       = 1
	fcgiRequestComplete = 0

	fcgiHeaderLen = 8
	// fcgiMaxContent is the largest content a record can carry: the length
	// is 16 bits, so no record, however hostile, asks for more than
	// fcgiHeaderLen+65535+255 bytes.
	fcgiMaxContent = 0xffff
)

const (
	// maxStdoutBytes bounds the page: php-fpm's short JSON status is a few
	// hundred bytes, the full one grows by about 400 bytes per worker.
	maxStdoutBytes = 1 << 20
	// maxStderrBytes bounds what is kept of FCGI_STDERR; the rest is
	// dropped, not an error.
	maxStderrBytes = 4 << 10
)

var (
	errShortRecord = errors.New("fastcgi: short record")
	errTooLarge    = fmt.Errorf("fastcgi: response larger than %d bytes", maxStdoutBytes)
)

// record is one FastCGI record; content aliases the decoded bytes.
type record struct {
	typ       uint8
	requestID uint16
	content   []byte
}

// readRecord decodes the record at the start of b and returns how many
// bytes it took, or errShortRecord when b does not yet hold all of it.
func readRecord(b []byte) (record, int, error) {
	if len(b) < fcgiHeaderLen {
		return record{}, 0, errShortRecord
	}
	if b[0] != fcgiVersion1 {
		return record{}, 0, fmt.Errorf("fastcgi: version %d, want 1", b[0])
	}
	contentLen := int(binary.BigEndian.Uint16(b[4:6]))
	n := fcgiHeaderLen + contentLen + int(b[6])
	if len(b) < n {
		return record{}, 0, errShortRecord
	}
	r := record{
		typ:       b[1],
		requestID: binary.BigEndian.Uint16(b[2:4]),
		content:   b[fcgiHeaderLen : fcgiHeaderLen+contentLen],
	}
	return r, n, nil
}

// response collects one request's stdout and stderr.
type response struct {
	stdout    []byte
	stderr    []byte
	done      bool
	appStatus uint32
}

// decode consumes every complete record of b that belongs to requestID and
// returns how many bytes it used. It stops at FCGI_END_REQUEST; records of
// other requests and of types a responder does not send are skipped.
func (r *response) decode(b []byte, requestID uint16) (int, error) {
	used := 0
	for !r.done {
		rec, n, err := readRecord(b[used:])
		if errors.Is(err, errShortRecord) {
			return used, nil
		}
		if err != nil {
			return used, err
		}
		used += n
		if rec.requestID != requestID {
			continue
		}
		if err := r.add(rec); err != nil {
			return used, err
		}
	}
	return used, nil
}

func (r *response) add(rec record) error {
	switch rec.typ {
	case fcgiStdout:
		if len(r.stdout)+len(rec.content) > maxStdoutBytes {
			return errTooLarge
		}
		r.stdout = append(r.stdout, rec.content...)
	case fcgiStderr:
		room := maxStderrBytes - len(r.stderr)
		r.stderr = append(r.stderr, rec.content[:min(room, len(rec.content))]...)
	case fcgiEndRequest:
		if len(rec.content) < 8 {
			return fmt.Errorf("fastcgi: end-request body of %d bytes, want 8", len(rec.content))
		}
		r.appStatus = binary.BigEndian.Uint32(rec.content[0:4])
		if ps := rec.content[4]; ps != fcgiRequestComplete {
			return fmt.Errorf("fastcgi: request not completed: %s", protocolStatus(ps))
		}
		r.done = true
	}
	return nil
}

func protocolStatus(s uint8) string {
	switch s {
	case 1:
		return "FCGI_CANT_MPX_CONN"
	case 2:
		return "FCGI_OVERLOADED"
	case 3:
		return "FCGI_UNKNOWN_ROLE"
	}
	return fmt.Sprintf("protocol status %d", s)
}

// decodeResponse decodes a whole response held in b: the pure form of what
// Status does as bytes arrive, and the target of FuzzDecodeResponse.
func decodeResponse(b []byte, requestID uint16) (*response, error) {
	var r response
	if _, err := r.decode(b, requestID); err != nil {
		return &r, err
	}
	if !r.done {
		return &r, errors.New("fastcgi: response ended before FCGI_END_REQUEST")
	}
	return &r, nil
}

// appendRecord appends one record with content c, padded to a multiple of
// 8 bytes as the specification recommends. len(c) must not exceed
// fcgiMaxContent.
func appendRecord(b []byte, typ uint8, requestID uint16, c []byte) []byte {
	pad := (8 - len(c)%8) % 8
	b = append(b, fcgiVersion1, typ, byte(requestID>>8), byte(requestID), byte(len(c)>>8), byte(len(c)), byte(pad), 0)
	b = append(b, c...)
	return append(b, make([]byte, pad)...)
}

// appendParam appends one name-value pair: lengths below 128 take one
// byte, longer ones four with the top bit set.
func appendParam(b []byte, name, value string) []byte {
	for _, n := range []int{len(name), len(value)} {
		if n < 128 {
			b = append(b, byte(n))
		} else {
			b = binary.BigEndian.AppendUint32(b, uint32(n)|1<<31)
		}
	}
	b = append(b, name...)
	return append(b, value...)
}

// encodeRequest builds a whole responder request without a body: begin
// (keep-conn off, so php-fpm closes after answering), the parameters, the
// empty params record that ends them and an empty stdin.
func encodeRequest(requestID uint16, params [][2]string) ([]byte, error) {
	var p []byte
	for _, kv := range params {
		p = appendParam(p, kv[0], kv[1])
	}
	if len(p) > fcgiMaxContent {
		return nil, fmt.Errorf("fastcgi: %d bytes of parameters, at most %d fit one record", len(p), fcgiMaxContent)
	}
	b := appendRecord(nil, fcgiBeginRequest, requestID, []byte{0, fcgiResponder, 0, 0, 0, 0, 0, 0})
	b = appendRecord(b, fcgiParams, requestID, p)
	b = appendRecord(b, fcgiParams, requestID, nil)
	return appendRecord(b, fcgiStdin, requestID, nil), nil
}
