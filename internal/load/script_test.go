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
