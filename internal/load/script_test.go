package load

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"
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
	eachEngine(t, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		var out bytes.Buffer
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Requests: 10, Connections: 1, Threads: 1,
			Script: mustScript(t, "sandbox.lua"), ScriptOut: &out})
		if err := res.ScriptDone(); err != nil {
			t.Fatal(err)
		}
		if got := out.String(); got != "sandbox closed\n" {
			t.Errorf("script wrote %q, want sandbox closed", got)
		}
	})
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

// capture builds what the parser keeps of a response with these headers
// (name, value, ...) and body.
func capture(body string, hv ...string) *captured {
	c := &captured{keepHeaders: true, keepBody: true, body: []byte(body)}
	for i := 0; i < len(hv); i += 2 {
		s := len(c.arena)
		c.arena = append(append(c.arena, hv[i]...), hv[i+1]...)
		c.spans = append(c.spans, [4]int{s, s + len(hv[i]), s + len(hv[i]), len(c.arena)})
	}
	return c
}

// TestScanArg: what response() reads of its headers and body, from its
// bytecode; anything but indexing the headers lets them escape.
func TestScanArg(t *testing.T) {
	for _, c := range []struct {
		src           string
		headers, body argUse
	}{
		{"function response(s, h, b) n = (n or 0) + 1 end", argUnused, argUnused},
		{"function response(s) n = s end", argUnused, argUnused},
		{"function response() end", argUnused, argUnused},
		{"function response(s, h, b) x = h['X-Token'] end", argIndexed, argUnused},
		{"function response(s, h, b) x = h.Server, #h, h[s] end", argIndexed, argUnused},
		{"function response(s, h, b) if h['X'] == b then n = 1 end end", argIndexed, argEscapes},
		{"function response(s, h, b) x = #b end", argUnused, argIndexed},
		{"function response(s, h, b) kept = h end", argEscapes, argUnused},
		{"function response(s, h, b) local k = h; x = k.a end", argEscapes, argUnused},
		{"function response(s, h, b) for k, v in pairs(h) do x = k end end", argEscapes, argUnused},
		{"function response(s, h, b) f = function() return h end end", argEscapes, argUnused},
		{"function response(s, h, b) return h end", argEscapes, argUnused},
		{"function response(s, h, b) h = {} end", argEscapes, argUnused},
		{"function response(s, h, b) h.x = 1 end", argEscapes, argUnused},
		{"function response(s, h, b) h[h] = 1 end", argEscapes, argUnused},
		{"function response(s, h, b) if h then n = 1 end end", argEscapes, argUnused},
		{"function response(s, h, b) x = h == kept end", argEscapes, argUnused},
		{"function response(s, h, b) print(s, h) end", argEscapes, argUnused},
		{"function response(s, h, b) x = b:len() end", argUnused, argEscapes},
		{"function response(s, ...) x = select(1, ...) end", argEscapes, argEscapes},
		{"function response(...) end", argEscapes, argEscapes},
		{"function response(s, h, b, ...) x = h.a end", argIndexed, argUnused},
		{"response = print", argEscapes, argEscapes},
	} {
		lt := scriptThread(t, c.src)
		if lt.headersUse != c.headers || lt.bodyUse != c.body {
			t.Errorf("%s: headers %d, body %d; want %d, %d", c.src, lt.headersUse, lt.bodyUse, c.headers, c.body)
		}
	}
}

// TestScriptResponseHeaders: each response() sees that response's
// headers, whether its table is refilled (only indexed) or new (kept).
func TestScriptResponseHeaders(t *testing.T) {
	resps := []*captured{
		capture("one", "X-A", "1"),
		capture("two", "X-A", "2"),
		capture("three", "X-B", "3"),
		capture("four", "X-B", "4", "X-A", "5"),
		capture("five", "X-A", "6", "X-A", "7"),
	}
	want := []string{"1 nil one", "2 nil two", "nil 3 three", "5 4 four", "7 nil five"}
	lt := scriptThread(t, `
seen = {}
function response(s, h, b) seen[#seen + 1] = (h["X-A"] or "nil") .. " " .. (h["X-B"] or "nil") .. " " .. b end
`)
	if lt.headersUse != argIndexed {
		t.Fatalf("headers %d, want argIndexed", lt.headersUse)
	}
	kept := scriptThread(t, `
kept = {}
function response(s, h, b) kept[#kept + 1] = { h, b } end
`)
	for _, c := range resps {
		for _, th := range []*luaThread{lt, kept} {
			if err := th.callResponse(200, c); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The kept tables are read after the last call: each still holds its
	// own response's headers.
	if err := kept.L.DoString(`
seen = {}
for i, k in ipairs(kept) do
  seen[i] = (k[1]["X-A"] or "nil") .. " " .. (k[1]["X-B"] or "nil") .. " " .. k[2]
  if i > 1 and k[1] == kept[i - 1][1] then seen[i] = "same table" end
end
`); err != nil {
		t.Fatal(err)
	}
	for name, th := range map[string]*luaThread{"indexed": lt, "kept": kept} {
		seen := th.L.GetGlobal("seen").(*lua.LTable)
		for i, w := range want {
			if got := seen.RawGetInt(i + 1).String(); got != w {
				t.Errorf("%s: response %d saw %q, want %q", name, i+1, got, w)
			}
		}
	}
}

// TestScriptResponseAllocs: a response() that does not keep its headers
// table costs no allocation per response once the server's headers
// recur.
func TestScriptResponseAllocs(t *testing.T) {
	c := capture("hello\n", "Server", "nginx", "Content-Type", "text/plain", "Content-Length", "6")
	for _, src := range []string{constRequest, headerRequest} {
		lt := scriptThread(t, src)
		lt.callResponse(200, c)
		if n := testing.AllocsPerRun(1000, func() {
			if err := lt.callResponse(200, c); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%s: %v allocations per response()", src, n)
		}
	}
}

// headerRequest's response() reads a header and the body.
const headerRequest = `
function response(status, headers, body)
  if headers["Content-Type"] == "text/plain" and body ~= "" then n = (n or 0) + 1 end
end
`

// keptRequest's response() keeps its headers.
const keptRequest = `
function response(status, headers, body) last = headers end
`

func benchResponse(b *testing.B, src string) {
	lt := scriptThread(b, src)
	c := capture("hello\n", "Server", "nginx", "Content-Type", "text/plain", "Content-Length", "6")
	b.ReportAllocs()
	for b.Loop() {
		lt.callResponse(200, c)
	}
}

// BenchmarkScriptResponse: response() counting, as bench/loadgen.sh's
// lua-response.
func BenchmarkScriptResponse(b *testing.B) { benchResponse(b, constRequest) }

// BenchmarkScriptResponseIndexed: response() reading a header and the
// body (one table refilled).
func BenchmarkScriptResponseIndexed(b *testing.B) { benchResponse(b, headerRequest) }

// BenchmarkScriptResponseKept: response() keeping its headers (a new
// table per response, as before).
func BenchmarkScriptResponseKept(b *testing.B) { benchResponse(b, keptRequest) }
