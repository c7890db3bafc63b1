package load

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// nginxResponse is a typical 230-byte nginx response to a small static file.
const nginxResponse = "HTTP/1.1 200 OK\r\n" +
	"Server: nginx\r\n" +
	"Date: Tue, 14 May 2024 10:00:00 GMT\r\n" +
	"Content-Type: text/html\r\n" +
	"Content-Length: 23\r\n" +
	"Last-Modified: Tue, 14 May 2024 09:00:00 GMT\r\n" +
	"Connection: keep-alive\r\n" +
	"ETag: \"66433650-17\"\r\n" +
	"\r\n" +
	"<p>Hello from nginx</p>"

// switchingHead is a 101 response, after which the connection speaks
// another protocol.
const switchingHead = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"

// parseResult is what one response parse gives, in a comparable form.
type parseResult struct {
	N         int // Bytes consumed by feed, over all calls.
	Done      bool
	Status    int
	Body      int64
	KeepAlive bool
	Err       string // "", "malformed", "truncated" or "other".
}

// parseCase is a response as the connection delivers it.
type parseCase struct {
	name   string
	in     string
	head   bool // The request was HEAD.
	closed bool // The connection closes after in.
	want   parseResult
}

// parseCases are real-world responses; each must parse alike however it
// is split.
var parseCases = []parseCase{
	{
		name: "nginx content-length",
		in:   nginxResponse,
		want: parseResult{N: len(nginxResponse), Done: true, Status: 200, Body: 23, KeepAlive: true},
	},
	{
		name: "chunked with extensions and trailers",
		in: "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nTrailer: Expires\r\n\r\n" +
			"7;foo=bar\r\nMozilla\r\n9 ; name=\"q;x\"\r\nDeveloper\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n" +
			"0;last\r\nExpires: Wed, 21 Oct 2015 07:28:00 GMT\r\nX-Checksum: 1\r\n\r\n",
		want: parseResult{Done: true, Status: 200, Body: 7 + 9 + 26, KeepAlive: true},
	},
	{
		name: "chunked without trailer",
		in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		want: parseResult{Done: true, Status: 200, Body: 5, KeepAlive: true},
	},
	{
		name: "chunked empty",
		in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n000\r\n\r\n",
		want: parseResult{Done: true, Status: 200, Body: 0, KeepAlive: true},
	},
	{
		name: "chunked wins over content-length",
		in:   "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: CHUNKED\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
		want: parseResult{Done: true, Status: 200, Body: 3, KeepAlive: true},
	},
	{
		name: "chunked with bare LF",
		in:   "HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n",
		want: parseResult{Done: true, Status: 200, Body: 3, KeepAlive: true},
	},
	{
		name:   "http/1.0 delimited by close",
		in:     "HTTP/1.0 200 OK\r\nServer: SimpleHTTP/0.6 Python/3.11.2\r\nContent-type: text/plain\r\n\r\nhello, world",
		closed: true,
		want:   parseResult{Done: true, Status: 200, Body: 12},
	},
	{
		name:   "http/1.1 delimited by close",
		in:     "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/html\r\n\r\n<h1>oops</h1>",
		closed: true,
		want:   parseResult{Done: true, Status: 500, Body: 13},
	},
	{
		name:   "transfer-encoding without chunked delimited by close",
		in:     "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 2\r\n\r\nabcd",
		closed: true,
		want:   parseResult{Done: true, Status: 200, Body: 4},
	},
	{
		name:   "transfer-encoding ignored in http/1.0",
		in:     "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
		closed: true,
		want:   parseResult{Done: true, Status: 200, Body: 8},
	},
	{
		name:   "delimited by close with empty body",
		in:     "HTTP/1.0 200 OK\r\n\r\n",
		closed: true,
		want:   parseResult{Done: true, Status: 200},
	},
	{
		name: "204",
		in:   "HTTP/1.1 204 No Content\r\nServer: nginx\r\nDate: Tue, 14 May 2024 10:00:00 GMT\r\nConnection: keep-alive\r\n\r\n",
		want: parseResult{Done: true, Status: 204, KeepAlive: true},
	},
	{
		name: "304 with content-length",
		in:   "HTTP/1.1 304 Not Modified\r\nETag: \"66433650-c\"\r\nContent-Length: 612\r\n\r\n",
		want: parseResult{Done: true, Status: 304, KeepAlive: true},
	},
	{
		name: "HEAD with content-length",
		in:   "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 615\r\n\r\n",
		head: true,
		want: parseResult{Done: true, Status: 200, KeepAlive: true},
	},
	{
		name: "HEAD with chunked",
		in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
		head: true,
		want: parseResult{Done: true, Status: 200, KeepAlive: true},
	},
	{
		name: "100 continue then 200",
		in:   "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		want: parseResult{Done: true, Status: 200, Body: 2, KeepAlive: true},
	},
	{
		name: "103 early hints then 200",
		in: "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload; as=style\r\nConnection: close\r\nContent-Length: 9\r\n\r\n" +
			"HTTP/1.1 100 Continue\r\n\r\n" +
			"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
		want: parseResult{Done: true, Status: 200, KeepAlive: true},
	},
	{
		name: "101 switching protocols",
		in:   switchingHead + "\x81\x05hello",
		want: parseResult{N: len(switchingHead), Done: true, Status: 101},
	},
	{
		name: "connection close",
		in:   "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nConnection: Close\r\n\r\nbusy",
		want: parseResult{Done: true, Status: 503, Body: 4},
	},
	{
		name: "connection tokens",
		in:   "HTTP/1.1 200 OK\r\nConnection: Upgrade, ,close\r\nContent-Length: 1\r\n\r\nx",
		want: parseResult{Done: true, Status: 200, Body: 1},
	},
	{
		name: "keep-alive on http/1.0",
		in:   "HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nKeep-Alive: timeout=5, max=100\r\nContent-Length: 3\r\n\r\nabc",
		want: parseResult{Done: true, Status: 200, Body: 3, KeepAlive: true},
	},
	{
		name: "http/1.0 with content-length closes",
		in:   "HTTP/1.0 404 Not Found\r\nContent-Length: 3\r\n\r\nnah",
		want: parseResult{Done: true, Status: 404, Body: 3},
	},
	{
		name: "status without reason",
		in:   "HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n",
		want: parseResult{Done: true, Status: 200, KeepAlive: true},
	},
	{
		name: "status with empty reason",
		in:   "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n",
		want: parseResult{Done: true, Status: 404, KeepAlive: true},
	},
	{
		name: "bare LF",
		in:   "HTTP/1.1 200 OK\nContent-Length: 2\nX-Empty:\n\nok",
		want: parseResult{Done: true, Status: 200, Body: 2, KeepAlive: true},
	},
	{
		name: "repeated equal content-length and odd spacing",
		in:   "HTTP/1.1 200 OK\r\ncontent-length:2\r\nCONTENT-LENGTH: \t2 \r\nX-A:b:c\r\n\r\nok",
		want: parseResult{Done: true, Status: 200, Body: 2, KeepAlive: true},
	},
	{
		name: "bytes after the response",
		in:   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n",
		want: parseResult{N: 40, Done: true, Status: 200, Body: 2, KeepAlive: true},
	},
	{
		name:   "huge content-length then close",
		in:     "HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\n\r\nonly this",
		closed: true,
		want:   parseResult{Status: 200, Body: 9, Err: "truncated"},
	},
	{
		name:   "close mid headers",
		in:     "HTTP/1.1 200 OK\r\nContent-Len",
		closed: true,
		want:   parseResult{Status: 200, Err: "truncated"},
	},
	{
		name:   "close mid chunked body",
		in:     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel",
		closed: true,
		want:   parseResult{Status: 200, Body: 3, Err: "truncated"},
	},
	{
		name:   "close before last chunk",
		in:     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n",
		closed: true,
		want:   parseResult{Status: 200, Body: 5, Err: "truncated"},
	},
	{
		name:   "close in trailer",
		in:     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: y\r\n",
		closed: true,
		want:   parseResult{Status: 200, Err: "truncated"},
	},
	{
		name:   "close after interim response",
		in:     "HTTP/1.1 100 Continue\r\n\r\n",
		closed: true,
		want:   parseResult{Err: "truncated"},
	},
	{
		name:   "close before any byte",
		in:     "",
		closed: true,
		want:   parseResult{Err: "truncated"},
	},
}

// malformedCases are responses that must fail with ErrMalformed however
// they are split.
var malformedCases = []struct {
	name, in string
}{
	{"garbage status line", "garbage\r\n\r\n"},
	{"status code not a number", "HTTP/1.1 abc\r\n\r\n"},
	{"status code too short", "HTTP/1.1 20\r\n\r\n"},
	{"status code too long", "HTTP/1.1 2000 OK\r\n\r\n"},
	{"status code below 100", "HTTP/1.1 099 Odd\r\n\r\n"},
	{"http/2 status line", "HTTP/2 200\r\n\r\n"},
	{"lower-case protocol", "http/1.1 200 OK\r\n\r\n"},
	{"empty status line", "\r\nHTTP/1.1 200 OK\r\n\r\n"},
	{"double space in status line", "HTTP/1.1  200 OK\r\n\r\n"},
	{"negative content-length", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n"},
	{"plus content-length", "HTTP/1.1 200 OK\r\nContent-Length: +1\r\n\r\nx"},
	{"invalid content-length", "HTTP/1.1 200 OK\r\nContent-Length: 12a\r\n\r\n"},
	{"empty content-length", "HTTP/1.1 200 OK\r\nContent-Length:\r\n\r\n"},
	{"list content-length", "HTTP/1.1 200 OK\r\nContent-Length: 1, 1\r\n\r\nx"},
	{"content-length overflow", "HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n"},
	{"conflicting content-length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"},
	{"conflicting content-length on 304", "HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"},
	{"bad chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"},
	{"empty chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\r\n"},
	{"negative chunk size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n-1\r\n"},
	{"chunk size with inner space", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1 0\r\n"},
	{"chunk size overflow", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"},
	{"chunk size CR without LF", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\rx"},
	{"chunk longer than its size", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n0\r\n\r\n"},
	{"header without colon", "HTTP/1.1 200 OK\r\nServer nginx\r\n\r\n"},
	{"space before colon", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello"},
	{"empty header name", "HTTP/1.1 200 OK\r\n: x\r\n\r\n"},
	{"obsolete line folding", "HTTP/1.1 200 OK\r\nX-Long: a\r\n b\r\nContent-Length: 0\r\n\r\n"},
	{"leading folding", "HTTP/1.1 200 OK\r\n\tX: a\r\n\r\n"},
	{"trailer without colon", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nbad trailer\r\n\r\n"},
	{"interim response then garbage", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 abc\r\n\r\n"},
}

// runParse feeds pieces to p as a connection would deliver them and calls
// eof after the last one when closed is true.
func runParse(p *respParser, head, closed bool, pieces ...[]byte) parseResult {
	p.reset(head)
	var r parseResult
	var err error
	for _, b := range pieces {
		var n int
		n, r.Done, err = p.feed(b)
		r.N += n
		if n < 0 || n > len(b) {
			r.Err = "feed consumed " + strconv.Itoa(n) + " of " + strconv.Itoa(len(b)) + " bytes"
			return r
		}
		if err != nil || r.Done {
			break
		}
		if n != len(b) {
			r.Err = "feed consumed " + strconv.Itoa(n) + " of " + strconv.Itoa(len(b)) + " bytes without finishing"
			return r
		}
	}
	if err == nil && !r.Done && closed {
		r.Done, err = p.eof()
	}
	if r.Done {
		r.Status, r.KeepAlive = p.status(), p.keepAlive()
	} else {
		r.Status = p.status()
	}
	r.Body = p.bodyBytes()
	r.Err = errClass(err)
	return r
}

// errClass names the sentinel that err wraps.
func errClass(err error) string {
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrMalformed):
		return "malformed"
	case errors.Is(err, ErrTruncated):
		return "truncated"
	}
	return "other"
}

// feedSplits returns in as one piece, byte by byte, and split in two at every
// position (only the first maxSplits positions and the last ones for a
// long input).
func feedSplits(in []byte, maxSplits int) map[string][][]byte {
	m := map[string][][]byte{"whole": {in}}
	bytewise := make([][]byte, len(in))
	for i := range in {
		bytewise[i] = in[i : i+1]
	}
	m["bytewise"] = bytewise
	for i := 1; i < len(in); i++ {
		if i > maxSplits && i < len(in)-maxSplits {
			continue
		}
		m["split at "+strconv.Itoa(i)] = [][]byte{in[:i], in[i:]}
	}
	return m
}

func TestParse(t *testing.T) {
	p := newRespParser()
	for _, tc := range parseCases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want.N == 0 && want.Err == "" {
				want.N = len(tc.in)
			}
			if want.Err != "" {
				want.N = len(tc.in) // Everything is consumed before the close.
			}
			for how, pieces := range feedSplits([]byte(tc.in), 1<<20) {
				got := runParse(p, tc.head, tc.closed, pieces...)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: parse mismatch (-want +got):\n%s", how, diff)
				}
			}
		})
	}
}

func TestParseMalformed(t *testing.T) {
	p := newRespParser()
	for _, tc := range malformedCases {
		t.Run(tc.name, func(t *testing.T) {
			for how, pieces := range feedSplits([]byte(tc.in), 1<<20) {
				got := runParse(p, false, true, pieces...)
				if got.Err != "malformed" || got.Done {
					t.Errorf("%s: got %+v, want a malformed error", how, got)
				}
			}
		})
	}
}

func TestParseHeadersTooLarge(t *testing.T) {
	long := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\nContent-Length: 0\r\n\r\n"
	many := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Some-Header: some value\r\n", 3000) + "Content-Length: 0\r\n\r\n"
	interim := strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 3000) + "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"
	unended := "HTTP/1.1 200 OK\r\nX-Big: " + strings.Repeat("a", 70<<10)
	p := newRespParser()
	for name, in := range map[string]string{"long line": long, "many headers": many, "many interim responses": interim, "unended line": unended} {
		for how, pieces := range feedSplits([]byte(in), 16) {
			got := runParse(p, false, true, pieces...)
			if got.Err != "malformed" {
				t.Errorf("%s, %s: got %+v, want a malformed error", name, how, got)
			}
		}
	}

	// Exactly 64 KiB of head is still fine.
	head := "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: \r\n\r\n"
	fit := strings.Replace(head, "X-Pad: ", "X-Pad: "+strings.Repeat("p", maxHeadBytes-len(head)), 1)
	for how, pieces := range feedSplits([]byte(fit), 16) {
		got := runParse(p, false, false, pieces...)
		want := parseResult{N: maxHeadBytes, Done: true, Status: 200, KeepAlive: true}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("64 KiB head, %s: parse mismatch (-want +got):\n%s", how, diff)
		}
	}
}

// TestParseTruncatedEverywhere closes the connection at every position of
// each response: before the end that is ErrTruncated, except in a body
// delimited by close.
func TestParseTruncatedEverywhere(t *testing.T) {
	p := newRespParser()
	for _, tc := range parseCases {
		if tc.want.Err != "" || tc.closed {
			continue
		}
		end := tc.want.N
		if end == 0 {
			end = len(tc.in)
		}
		for i := 0; i < end; i++ {
			got := runParse(p, tc.head, true, []byte(tc.in[:i]))
			if got.Err != "truncated" || got.Done {
				t.Errorf("%s: closed after %d bytes: got %+v, want a truncated error", tc.name, i, got)
			}
		}
	}
}

func TestParseBackToBack(t *testing.T) {
	first := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x\r\nabc\r\n0\r\n\r\n"
	second := nginxResponse
	buf := []byte(first + second + first)
	p := newRespParser()
	var got []parseResult
	for len(buf) > 0 {
		p.reset(false)
		n, done, err := p.feed(buf)
		got = append(got, parseResult{N: n, Done: done, Status: p.status(), Body: p.bodyBytes(), KeepAlive: p.keepAlive(), Err: errClass(err)})
		if !done || err != nil {
			break
		}
		buf = buf[n:]
	}
	want := []parseResult{
		{N: len(first), Done: true, Status: 200, Body: 3, KeepAlive: true},
		{N: len(second), Done: true, Status: 200, Body: 23, KeepAlive: true},
		{N: len(first), Done: true, Status: 200, Body: 3, KeepAlive: true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("back-to-back responses mismatch (-want +got):\n%s", diff)
	}
}

func TestParseStarted(t *testing.T) {
	p := newRespParser()
	if p.started() {
		t.Errorf("started() = true before any byte")
	}
	if _, _, err := p.feed(nil); err != nil || p.started() {
		t.Errorf("feed(nil): err = %v, started() = %v, want nil, false", err, p.started())
	}
	if _, _, err := p.feed([]byte("H")); err != nil || !p.started() {
		t.Errorf("feed(\"H\"): err = %v, started() = %v, want nil, true", err, p.started())
	}
	p.reset(false)
	if p.started() {
		t.Errorf("started() = true after reset")
	}
	if _, err := p.eof(); !errors.Is(err, ErrTruncated) {
		t.Errorf("eof() before any byte: err = %v, want ErrTruncated", err)
	}
}

func TestParseNoAllocs(t *testing.T) {
	resp := []byte(nginxResponse)
	chunked := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7;foo=bar\r\nMozilla\r\n0\r\nX: y\r\n\r\n")
	p := newRespParser()
	for name, pieces := range map[string][][]byte{
		"whole":          {resp},
		"split headers":  {resp[:30], resp[30:100], resp[100:]},
		"bytewise":       feedSplits(resp, 0)["bytewise"],
		"chunked whole":  {chunked},
		"chunked halves": {chunked[:40], chunked[40:]},
	} {
		runParse(p, false, false, pieces...) // Let the line buffer grow.
		allocs := testing.AllocsPerRun(100, func() {
			if r := runParse(p, false, false, pieces...); !r.Done || r.Err != "" {
				t.Fatalf("%s: %+v", name, r)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per response, want 0", name, allocs)
		}
	}
}

func BenchmarkParseNginx(b *testing.B) {
	resp := []byte(nginxResponse)
	p := newRespParser()
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		p.reset(false)
		if _, done, err := p.feed(resp); !done || err != nil {
			b.Fatalf("feed: done = %v, err = %v", done, err)
		}
	}
}

// BenchmarkParseNginxSplit feeds the response in three reads, so the
// header line split between reads is copied.
func BenchmarkParseNginxSplit(b *testing.B) {
	resp := []byte(nginxResponse)
	p := newRespParser()
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		if r := runParse(p, false, false, resp[:50], resp[50:150], resp[150:]); !r.Done || r.Err != "" {
			b.Fatalf("parse: %+v", r)
		}
	}
}

func BenchmarkParseChunked(b *testing.B) {
	resp := []byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"40\r\n" + strings.Repeat("x", 64) + "\r\n40\r\n" + strings.Repeat("y", 64) + "\r\n0\r\n\r\n")
	p := newRespParser()
	b.ReportAllocs()
	b.SetBytes(int64(len(resp)))
	for b.Loop() {
		p.reset(false)
		if _, done, err := p.feed(resp); !done || err != nil {
			b.Fatalf("feed: done = %v, err = %v", done, err)
		}
	}
}
