package load

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func mustScript(t *testing.T, name string) *Script {
	t.Helper()
	s, err := LoadScript("testdata/scripts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScriptSandbox: a script has no way to files or programs, and
// io.write reaches the script's output.
func TestScriptSandbox(t *testing.T) {
	s := newCounting(t, nil)
	var out bytes.Buffer
	res := mustRun(t, Options{URL: s.URL, Requests: 10, Connections: 1, Threads: 1,
		Script: mustScript(t, "sandbox.lua"), ScriptOut: &out})
	if err := res.ScriptDone(); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "sandbox closed\n" {
		t.Errorf("script wrote %q, want sandbox closed", got)
	}
}

// TestScriptSyntaxError: the error names the file and line.
func TestScriptSyntaxError(t *testing.T) {
	_, err := CompileScript("bad.lua", []byte("function request()\n  return (\nend\n"))
	if !errors.Is(err, ErrScript) || !strings.Contains(err.Error(), "bad.lua:3:") {
		t.Errorf("err = %v, want ErrScript at bad.lua:3", err)
	}
}

// TestScriptInitError: an error raised in init stops the run before it
// starts, with file:line.
func TestScriptInitError(t *testing.T) {
	s := newCounting(t, nil)
	sc, err := CompileScript("init.lua", []byte("function init(args)\n  error(\"no \" .. args[1])\nend\n"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Run(context.Background(), Options{URL: s.URL, Duration: time.Second, Script: sc, ScriptArgs: []string{"token"}})
	if !errors.Is(err, ErrScript) || !strings.Contains(err.Error(), "init.lua:2: no token") {
		t.Errorf("err = %v, want ErrScript with init.lua:2: no token", err)
	}
	if s.requests.Load() != 0 {
		t.Errorf("%d requests sent", s.requests.Load())
	}
}

func TestCountRequests(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int
	}{
		{"GET / HTTP/1.1\r\nHost: a\r\n\r\n", 1},
		{"GET / HTTP/1.1\r\n\r\nPOST /x HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /y HTTP/1.1\r\n\r\n", 3},
		{"GET / HTTP/1.1\r\nHost: a\r\n", 0},
		{"POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab", 0},
		{"hello\r\n\r\n", 0},
		{"", 0},
	} {
		got, err := countRequests([]byte(c.in))
		if got != c.want || (c.want == 0) != (err != nil) {
			t.Errorf("countRequests(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func scriptThread(t testing.TB, src string) *luaThread {
	t.Helper()
	sc, err := CompileScript("bench.lua", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	e, err := prepare(context.Background(), Options{URL: "http://127.0.0.1:1/", Threads: 1, Connections: 1, Script: sc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.script.close)
	return e.script.threads[0]
}

const constRequest = `
local req
function init(args) req = wrk.format(nil, "/x") end
function request() return req end
function response(status, headers, body) n = (n or 0) + 1 end
`

// TestScriptRequestAllocs: a request() that returns one string costs no
// allocation per request.
func TestScriptRequestAllocs(t *testing.T) {
	lt := scriptThread(t, constRequest)
	if n := testing.AllocsPerRun(1000, func() {
		if _, err := lt.call(lt.request); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("%v allocations per request()", n)
	}
}

func BenchmarkScriptRequest(b *testing.B) {
	lt := scriptThread(b, constRequest)
	b.ReportAllocs()
	for b.Loop() {
		lt.call(lt.request)
	}
}

func BenchmarkScriptResponse(b *testing.B) {
	lt := scriptThread(b, constRequest)
	c := &captured{}
	for _, h := range []string{"Server", "nginx", "Content-Type", "text/plain", "Content-Length", "6"} {
		c.arena = append(c.arena, h...)
	}
	c.spans = [][4]int{{0, 6, 6, 11}, {11, 23, 23, 33}, {33, 47, 47, 48}}
	c.body = []byte("hello\n")
	b.ReportAllocs()
	for b.Loop() {
		lt.callResponse(200, c)
	}
}
