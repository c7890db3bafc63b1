package load

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// ErrScript marks a Lua script that failed: a syntax error, an error
// raised by one of its functions, or a request it returned that is not
// HTTP. The message starts with the script's file and line.
var ErrScript = errors.New("script error")

// Script is a wrk Lua script, compiled once. Each run gives it a main Lua
// state, where setup and done run, and one state per event-loop thread,
// where init, request, response and delay run, as wrk does.
type Script struct {
	path    string
	proto   *lua.FunctionProto
	prelude *lua.FunctionProto
}

// LoadScript reads and compiles the wrk script at path.
func LoadScript(path string) (*Script, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrScript, err)
	}
	return CompileScript(path, b)
}

// CompileScript compiles a wrk script from its source; name is the file
// name its errors carry.
func CompileScript(name string, src []byte) (*Script, error) {
	proto, err := compileLua(name, src)
	if err != nil {
		return nil, err
	}
	pre, err := compileLua("wrk.lua", []byte(wrkPrelude))
	if err != nil {
		return nil, err
	}
	return &Script{path: name, proto: proto, prelude: pre}, nil
}

// syntaxRE matches gopher-lua's syntax errors, "name line:5(column:3)
// near 'x': msg", so that they read as file:line: msg.
var (
	syntaxRE = regexp.MustCompile(`^(.*) line:(\d+)\(column:\d+\) (near .*?):\s*(.*)$`)
	eofRE    = regexp.MustCompile(`^(.*) at EOF:\s*(.*)$`)
)

func compileLua(name string, src []byte) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(bytes.NewReader(src), name)
	if err != nil {
		msg := strings.TrimSpace(err.Error())
		if m := syntaxRE.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("%s:%s: %s %s", m[1], m[2], m[4], m[3])
		} else if m := eofRE.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("%s:%d: %s at the end of the file", m[1], bytes.Count(src, []byte("\n"))+1, m[2])
		}
		return nil, fmt.Errorf("%w: %s", ErrScript, msg)
	}
	proto, err := lua.Compile(chunk, name)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrScript, name, err)
	}
	return proto, nil
}

// wrkPrelude defines the Lua half of wrk's table, as wrk 4.1 has it;
// wrk.format is Go's, in wrkFormat.
const wrkPrelude = `
local wrk = wrk

function wrk.resolve(host, service)
  local addrs = wrk.lookup(host, service)
  for i = #addrs, 1, -1 do
    if not wrk.connect(addrs[i]) then
      table.remove(addrs, i)
    end
  end
  wrk.addrs = addrs
end

function wrk.setup(thread)
  thread.addr = wrk.addrs[1]
  if type(setup) == "function" then
    setup(thread)
  end
end

function wrk.init(args)
  if not wrk.headers["Host"] then
    local host = wrk.host
    if host:find(":") then
      host = "[" .. host .. "]"
    end
    if wrk.port then
      host = host .. ":" .. wrk.port
    end
    wrk.headers["Host"] = host
  end
  if type(init) == "function" then
    init(args)
  end
  local req = wrk.format()
  wrk.request = function()
    return req
  end
end

`

// scriptRun is a script's states for one run.
type scriptRun struct {
	s       *Script
	main    *lua.LState
	threads []*luaThread
	out     *lockedWriter
	// What thread 0's state defines after init, as wrk decides it once:
	// requests per request() result, and which functions exist.
	pipeline    int
	dynamic     bool
	hasDelay    bool
	hasResponse bool
	// Filled by the engine at the end, for done.
	latency, rates *hdrhistogram.Histogram
}

// luaThread is one event-loop thread's Lua state.
type luaThread struct {
	L        *lua.LState
	addr     *net.TCPAddr
	stopped  atomic.Bool
	request  *lua.LFunction
	response *lua.LFunction
	delay    *lua.LFunction
	static   []byte // wrk.request()'s result when request is not defined
	// Values handed to response() again and again, boxed once: header
	// names and values (up to maxInterned), statuses, the last body.
	interned map[string]lua.LValue
	statuses [600]lua.LValue
	lastBody lua.LValue
	// How response() uses its headers and body (scanArg): what it never
	// reads is neither captured nor built, and a headers table it only
	// indexes is hdr, refilled for every response instead of allocated.
	headersUse, bodyUse argUse
	hdr                 *lua.LTable
	hdrNames            []lua.LValue // the names set in hdr, in order
	hdrDistinct         map[string]struct{}
}

// maxHdrDistinct bounds the distinct names set in a reused headers
// table: gopher-lua's tables remember every key ever set (for next), so
// a table that saw more is replaced by a new one.
const maxHdrDistinct = 256

// maxInterned bounds a thread's interned header strings: a header whose
// values all differ (Date, a request id) fills it once, then costs what it
// would without.
const maxInterned = 4096

// intern returns b as a Lua string, the same value each time it recurs.
func (t *luaThread) intern(b []byte) lua.LValue {
	if v, ok := t.interned[string(b)]; ok { // no allocation for the lookup
		return v
	}
	v := lua.LValue(lua.LString(b))
	if t.interned == nil {
		t.interned = map[string]lua.LValue{}
	}
	if len(t.interned) < maxInterned {
		t.interned[string(b)] = v
	}
	return v
}

// lockedWriter serialises the scripts' print and io.write from threads.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

const (
	addrType   = "wrk.addr"
	threadType = "wrk.thread"
	statsType  = "wrk.stats"
)

// scriptErr turns a Lua error into an ErrScript whose message is the
// error value: "file:line: message", without gopher-lua's traceback.
func scriptErr(err error) error {
	var ae *lua.ApiError
	if errors.As(err, &ae) && ae.Object != nil {
		return fmt.Errorf("%w: %s", ErrScript, ae.Object.String())
	}
	return fmt.Errorf("%w: %w", ErrScript, err)
}

// newState opens a Lua state with the base, table, string and math
// libraries, print and io.write to out, os.time, os.clock and os.date, and
// nothing that reads or writes files or runs programs; then wrk's table,
// the prelude and the script.
func (sr *scriptRun) newState(t target, o Options) (*lua.LState, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true})
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath}, {lua.OsLibName, lua.OpenOs}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	for _, name := range []string{"dofile", "loadfile", "require", "module", "_printregs"} {
		L.SetGlobal(name, lua.LNil)
	}
	osLib, _ := L.GetGlobal("os").(*lua.LTable)
	safeOS := L.NewTable()
	for _, name := range []string{"time", "clock", "date"} {
		safeOS.RawSetString(name, osLib.RawGetString(name))
	}
	L.SetGlobal("os", safeOS)
	out := sr.out
	L.SetGlobal("print", L.NewFunction(func(L *lua.LState) int {
		var b strings.Builder
		for i := 1; i <= L.GetTop(); i++ {
			if i > 1 {
				b.WriteByte('\t')
			}
			b.WriteString(L.ToStringMeta(L.Get(i)).String())
		}
		b.WriteByte('\n')
		io.WriteString(out, b.String())
		return 0
	}))
	ioLib := L.NewTable()
	ioLib.RawSetString("write", L.NewFunction(func(L *lua.LState) int {
		var b strings.Builder
		for i := 1; i <= L.GetTop(); i++ {
			v := L.Get(i)
			if !lua.LVCanConvToString(v) {
				L.ArgError(i, "string expected, got "+v.Type().String())
			}
			b.WriteString(lua.LVAsString(v))
		}
		io.WriteString(out, b.String())
		return 0
	}))
	L.SetGlobal("io", ioLib)

	addrMT := L.NewTypeMetatable(addrType)
	addrMT.RawSetString("__tostring", L.NewFunction(func(L *lua.LState) int {
		a := checkAddr(L, 1)
		L.Push(lua.LString(a.IP.String() + ":" + strconv.Itoa(a.Port)))
		return 1
	}))
	threadMT := L.NewTypeMetatable(threadType)
	threadMT.RawSetString("__index", L.NewFunction(sr.threadIndex))
	threadMT.RawSetString("__newindex", L.NewFunction(threadNewIndex))
	statsMT := L.NewTypeMetatable(statsType)
	statsMT.RawSetString("__index", L.NewFunction(statsIndex))
	statsMT.RawSetString("__call", L.NewFunction(statsCall))
	statsMT.RawSetString("__len", L.NewFunction(statsLen))

	wrk := L.NewTable()
	u, _ := url.Parse(o.URL)
	wrk.RawSetString("scheme", lua.LString(t.scheme))
	wrk.RawSetString("host", lua.LString(t.hostname))
	if p := u.Port(); p != "" {
		wrk.RawSetString("port", lua.LString(p))
	}
	wrk.RawSetString("method", lua.LString(o.Method))
	wrk.RawSetString("path", lua.LString(t.path))
	headers := L.NewTable()
	for _, h := range o.Header {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.ContainsAny(h, "\r\n") {
			L.Close()
			return nil, fmt.Errorf("%w: header %q: want 'Name: value'", ErrInvalid, h)
		}
		headers.RawSetString(strings.TrimSpace(name), lua.LString(strings.TrimSpace(value)))
	}
	wrk.RawSetString("headers", headers)
	if len(o.Body) > 0 {
		wrk.RawSetString("body", lua.LString(o.Body))
	}
	wrk.RawSetString("format", L.NewFunction(wrkFormat))
	wrk.RawSetString("lookup", L.NewFunction(wrkLookup))
	wrk.RawSetString("connect", L.NewFunction(wrkConnect))
	L.SetGlobal("wrk", wrk)

	for _, p := range []*lua.FunctionProto{sr.s.prelude, sr.s.proto} {
		L.Push(L.NewFunctionFromProto(p))
		if err := L.PCall(0, 0, nil); err != nil {
			L.Close()
			return nil, scriptErr(err)
		}
	}
	return L, nil
}

func newAddr(L *lua.LState, a *net.TCPAddr) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = a
	L.SetMetatable(ud, L.GetTypeMetatable(addrType))
	return ud
}

func checkAddr(L *lua.LState, n int) *net.TCPAddr {
	ud := L.CheckUserData(n)
	a, ok := ud.Value.(*net.TCPAddr)
	if !ok {
		L.ArgError(n, "addr expected")
	}
	return a
}

// wrkFormat is wrk.format(method, path, headers, body), as wrk 4.1's
// Lua: the arguments default to wrk's fields, Host (if absent) and
// Content-Length (the body's length, or nil without a body) are set in
// the headers table it is given, and the headers follow in pairs order.
// In Go, it costs a fraction of the Lua one per request.
func wrkFormat(L *lua.LState) int {
	wrk, ok := L.GetGlobal("wrk").(*lua.LTable)
	if !ok {
		L.RaiseError("wrk is not a table")
	}
	arg := func(i int, field string) lua.LValue {
		if v := L.Get(i); v != lua.LNil {
			return v
		}
		return wrk.RawGetString(field)
	}
	str := func(v lua.LValue, what string) string {
		if !lua.LVCanConvToString(v) {
			L.RaiseError("wrk.format: %s is a %s, not a string", what, v.Type())
		}
		return lua.LVAsString(v)
	}
	method, path, body := arg(1, "method"), arg(2, "path"), arg(4, "body")
	headers, ok := arg(3, "headers").(*lua.LTable)
	if !ok {
		L.RaiseError("wrk.format: headers is not a table")
	}
	if L.GetField(headers, "Host") == lua.LNil {
		if defaults, ok := wrk.RawGetString("headers").(*lua.LTable); ok {
			L.SetField(headers, "Host", L.GetField(defaults, "Host"))
		}
	}
	var b string
	if body != lua.LNil && body != lua.LFalse {
		b = str(body, "the body")
		L.SetField(headers, "Content-Length", lua.LNumber(len(b)))
	} else {
		L.SetField(headers, "Content-Length", lua.LNil)
	}
	var sb strings.Builder
	sb.WriteString(str(method, "the method"))
	sb.WriteByte(' ')
	sb.WriteString(str(path, "the path"))
	sb.WriteString(" HTTP/1.1\r\n")
	for k, v := headers.Next(lua.LNil); k != lua.LNil; k, v = headers.Next(k) {
		sb.WriteString(str(k, "a header name"))
		sb.WriteString(": ")
		sb.WriteString(str(v, "a header value"))
		sb.WriteString("\r\n")
	}
	sb.WriteString("\r\n")
	sb.WriteString(b)
	L.Push(lua.LString(sb.String()))
	return 1
}

// wrkLookup is wrk.lookup(host, service): a table of addresses.
func wrkLookup(L *lua.LState) int {
	host, service := L.CheckString(1), L.CheckString(2)
	ips, err := net.LookupIP(host)
	if err != nil {
		L.RaiseError("unable to resolve %s:%s %v", host, service, err)
	}
	port, err := net.LookupPort("tcp", service)
	if err != nil {
		L.RaiseError("unable to resolve %s:%s %v", host, service, err)
	}
	t := L.NewTable()
	for _, ip := range ips {
		t.Append(newAddr(L, &net.TCPAddr{IP: ip, Port: port}))
	}
	L.Push(t)
	return 1
}

// wrkConnect is wrk.connect(addr): whether a TCP connection opens.
func wrkConnect(L *lua.LState) int {
	a := checkAddr(L, 1)
	c, err := net.DialTimeout("tcp", a.String(), 2*time.Second)
	if err == nil {
		c.Close()
	}
	L.Push(lua.LBool(err == nil))
	return 1
}

func checkThread(L *lua.LState) *luaThread { return checkUserData[luaThread](L, "thread") }

// threadIndex is the thread object's fields: get, set, stop and addr.
func (sr *scriptRun) threadIndex(L *lua.LState) int {
	t := checkThread(L)
	switch L.CheckString(2) {
	case "get":
		L.Push(L.NewFunction(func(L *lua.LState) int {
			t := checkThread(L)
			v, err := copyValue(t.L.GetGlobal(L.CheckString(2)), L, 0)
			if err != nil {
				L.RaiseError("%v", err)
			}
			L.Push(v)
			return 1
		}))
	case "set":
		L.Push(L.NewFunction(func(L *lua.LState) int {
			t := checkThread(L)
			v, err := copyValue(L.Get(3), t.L, 0)
			if err != nil {
				L.RaiseError("%v", err)
			}
			t.L.SetGlobal(L.CheckString(2), v)
			return 0
		}))
	case "stop":
		L.Push(L.NewFunction(func(L *lua.LState) int {
			checkThread(L).stopped.Store(true)
			return 0
		}))
	case "addr":
		if t.addr == nil {
			L.Push(lua.LNil)
		} else {
			L.Push(newAddr(L, t.addr))
		}
	default:
		L.Push(lua.LNil)
	}
	return 1
}

func threadNewIndex(L *lua.LState) int {
	t := checkThread(L)
	if L.CheckString(2) != "addr" {
		L.RaiseError("cannot set '%s' on thread", L.CheckString(2))
	}
	if L.Get(3) == lua.LNil {
		t.addr = nil
		return 0
	}
	a := *checkAddr(L, 3)
	t.addr = &a
	return 0
}

// copyValue copies v into the state dst, as wrk's thread:get and set
// do: nil, booleans, numbers, strings and tables of them.
func copyValue(v lua.LValue, dst *lua.LState, depth int) (lua.LValue, error) {
	switch v := v.(type) {
	case *lua.LNilType, lua.LBool, lua.LNumber, lua.LString:
		return v, nil
	case *lua.LTable:
		if depth > 64 {
			return nil, errors.New("cannot transfer a table nested deeper than 64 to thread")
		}
		t := dst.NewTable()
		var err error
		v.ForEach(func(k, val lua.LValue) {
			if err != nil {
				return
			}
			var ck, cv lua.LValue
			if ck, err = copyValue(k, dst, depth+1); err != nil {
				return
			}
			if cv, err = copyValue(val, dst, depth+1); err != nil {
				return
			}
			t.RawSet(ck, cv)
		})
		return t, err
	}
	return nil, fmt.Errorf("cannot transfer '%s' to thread", v.Type())
}

func checkStats(L *lua.LState) *statsObj { return checkUserData[statsObj](L, "stats") }

// checkUserData is the method receiver (argument 1) as a *T, or a Lua
// error naming what was expected.
func checkUserData[T any](L *lua.LState, what string) *T {
	ud := L.CheckUserData(1)
	v, ok := ud.Value.(*T)
	if !ok {
		L.ArgError(1, what+" expected")
	}
	return v
}

// statsObj is done's latency (µs) or requests (per thread per 100 ms,
// in requests/s) object.
type statsObj struct {
	h      *hdrhistogram.Histogram
	values []hdrhistogram.Bar // the distinct values, lazily
}

func (s *statsObj) distinct() []hdrhistogram.Bar {
	if s.values == nil {
		s.values = []hdrhistogram.Bar{}
		for _, b := range s.h.Distribution() {
			if b.Count > 0 {
				s.values = append(s.values, b)
			}
		}
	}
	return s.values
}

func statsIndex(L *lua.LState) int {
	s := checkStats(L)
	if n, ok := L.Get(2).(lua.LNumber); ok { // netdoctor's: the i-th distinct value
		v := s.distinct()
		if i := int(n); i >= 1 && i <= len(v) {
			L.Push(lua.LNumber(v[i-1].From))
		} else {
			L.Push(lua.LNil)
		}
		return 1
	}
	h := s.h
	switch L.CheckString(2) {
	case "min":
		L.Push(lua.LNumber(h.Min()))
	case "max":
		L.Push(lua.LNumber(h.Max()))
	case "mean":
		L.Push(lua.LNumber(h.Mean()))
	case "stdev":
		L.Push(lua.LNumber(h.StdDev()))
	case "percentile":
		L.Push(L.NewFunction(func(L *lua.LState) int {
			s := checkStats(L)
			L.Push(lua.LNumber(s.h.ValueAtPercentile(float64(L.CheckNumber(2)))))
			return 1
		}))
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// statsCall is stats(i): the i-th distinct value and its count.
func statsCall(L *lua.LState) int {
	s := checkStats(L)
	i := int(L.CheckNumber(2))
	v := s.distinct()
	if i < 1 || i > len(v) {
		L.Push(lua.LNumber(0))
		L.Push(lua.LNumber(0))
		return 2
	}
	L.Push(lua.LNumber(v[i-1].From))
	L.Push(lua.LNumber(v[i-1].Count))
	return 2
}

func statsLen(L *lua.LState) int {
	L.Push(lua.LNumber(len(checkStats(L).distinct())))
	return 1
}

func (sr *scriptRun) newStats(L *lua.LState, h *hdrhistogram.Histogram) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = &statsObj{h: h}
	L.SetMetatable(ud, L.GetTypeMetatable(statsType))
	return ud
}

func (sr *scriptRun) newThread(L *lua.LState, t *luaThread) *lua.LUserData {
	ud := L.NewUserData()
	ud.Value = t
	L.SetMetatable(ud, L.GetTypeMetatable(threadType))
	return ud
}

// startScript opens the states of a run, as wrk does: the main state,
// then per thread its state, setup(thread) in the main state and
// init(args) in the thread's; thread 0's first request says how many
// requests each request() result holds.
func (e *engine) startScript(out io.Writer) error {
	o := e.opts
	sr := &scriptRun{s: o.Script, out: &lockedWriter{w: out}}
	if sr.out.w == nil {
		sr.out.w = io.Discard
	}
	main, err := sr.newState(e.t, o)
	if err != nil {
		return err
	}
	sr.main = main
	e.script = sr
	port, _ := net.LookupPort("tcp", e.t.port)
	addrs := main.NewTable()
	addrs.Append(newAddr(main, &net.TCPAddr{IP: e.addr, Port: port}))
	main.GetGlobal("wrk").(*lua.LTable).RawSetString("addrs", addrs)
	args := append([]string{o.URL}, o.ScriptArgs...)
	for i := range o.Threads {
		L, err := sr.newState(e.t, o)
		if err != nil {
			sr.close()
			return err
		}
		lt := &luaThread{L: L}
		sr.threads = append(sr.threads, lt)
		wrk := L.GetGlobal("wrk").(*lua.LTable)
		wrk.RawSetString("thread", sr.newThread(L, lt))
		if err := main.CallByParam(lua.P{Fn: main.GetGlobal("wrk").(*lua.LTable).RawGetString("setup"), Protect: true},
			sr.newThread(main, lt)); err != nil {
			sr.close()
			return scriptErr(err)
		}
		argt := L.NewTable()
		for i, a := range args {
			argt.RawSetInt(i, lua.LString(a)) // wrk's args[0] is the URL
		}
		if err := L.CallByParam(lua.P{Fn: wrk.RawGetString("init"), Protect: true}, argt); err != nil {
			sr.close()
			return scriptErr(err)
		}
		lt.request, _ = L.GetGlobal("request").(*lua.LFunction)
		resp, _ := L.GetGlobal("response").(*lua.LFunction)
		lt.setResponse(resp)
		lt.delay, _ = L.GetGlobal("delay").(*lua.LFunction)
		fn := lt.request
		if fn == nil {
			fn, _ = wrk.RawGetString("request").(*lua.LFunction)
		}
		req, err := lt.call(fn)
		if err != nil {
			sr.close()
			return err
		}
		if lt.request == nil {
			lt.static = []byte(req)
		}
		if i == 0 {
			n, err := countRequests([]byte(req))
			if err != nil {
				sr.close()
				return fmt.Errorf("%w: %s: the request is not HTTP/1.1: %w", ErrScript, o.Script.path, err)
			}
			sr.pipeline = n
			sr.dynamic = lt.request != nil
			sr.hasDelay = lt.delay != nil
			sr.hasResponse = lt.response != nil
		}
		// Only thread 0 decides, as in wrk.
		if !sr.dynamic {
			lt.request = nil
		}
		if !sr.hasDelay {
			lt.delay = nil
		}
		if !sr.hasResponse {
			lt.setResponse(nil)
		}
	}
	e.req = sr.threads[0].static
	if e.req == nil {
		e.req = []byte{}
	}
	e.unit = int64(sr.pipeline)
	return nil
}

func (sr *scriptRun) close() {
	for _, t := range sr.threads {
		t.L.Close()
	}
	if sr.main != nil {
		sr.main.Close()
	}
}

// call runs a function of no arguments that returns a string: request.
func (t *luaThread) call(fn *lua.LFunction) (string, error) {
	L := t.L
	L.Push(fn)
	if err := L.PCall(0, 1, nil); err != nil {
		return "", scriptErr(err)
	}
	v := L.Get(-1)
	L.Pop(1)
	if s, ok := v.(lua.LString); ok {
		return string(s), nil
	}
	if lua.LVCanConvToString(v) {
		return lua.LVAsString(v), nil
	}
	return "", fmt.Errorf("%w: request() returned a %s, not a string", ErrScript, v.Type())
}

// callDelay runs delay(): milliseconds before the next request.
func (t *luaThread) callDelay() (time.Duration, error) {
	L := t.L
	L.Push(t.delay)
	if err := L.PCall(0, 1, nil); err != nil {
		return 0, scriptErr(err)
	}
	v := L.Get(-1)
	L.Pop(1)
	ms, _ := v.(lua.LNumber)
	if ms <= 0 {
		return 0, nil
	}
	return time.Duration(float64(ms) * float64(time.Millisecond)), nil
}

// setResponse keeps fn as the thread's response() and decides, from its
// bytecode, what of a response it needs.
func (t *luaThread) setResponse(fn *lua.LFunction) {
	t.response = fn
	if fn == nil {
		return
	}
	t.headersUse, t.bodyUse = scanArg(fn, 1), scanArg(fn, 2)
	t.hdr = t.L.NewTable()
	t.lastBody = lua.LString("")
}

// newCaptured returns what a connection's parser keeps of each response
// for response(): nil if response() is not defined or reads neither its
// headers nor its body.
func (t *luaThread) newCaptured() *captured {
	if t == nil || t.response == nil {
		return nil
	}
	c := &captured{keepHeaders: t.headersUse != argUnused, keepBody: t.bodyUse != argUnused}
	if !c.keepHeaders && !c.keepBody {
		return nil
	}
	return c
}

// callResponse runs response(status, headers, body) with what the
// parser captured (c is nil when response() reads neither).
func (t *luaThread) callResponse(status int, c *captured) error {
	L := t.L
	var h lua.LValue = t.hdr // argUnused: never read, so never filled
	switch t.headersUse {
	case argIndexed:
		h = t.refillHeaders(c)
	case argEscapes:
		// The script may keep the table: a new one each time, as wrk's.
		tb := L.CreateTable(0, len(c.spans))
		for _, s := range c.spans {
			tb.RawSet(t.intern(c.arena[s[0]:s[1]]), t.intern(c.arena[s[2]:s[3]]))
		}
		h = tb
	}
	var st lua.LValue
	if status >= 0 && status < len(t.statuses) {
		if st = t.statuses[status]; st == nil {
			st = lua.LNumber(status)
			t.statuses[status] = st
		}
	} else {
		st = lua.LNumber(status)
	}
	if t.bodyUse != argUnused {
		if last, ok := t.lastBody.(lua.LString); !ok || string(last) != string(c.body) {
			t.lastBody = lua.LString(c.body)
		}
	}
	L.Push(t.response)
	L.Push(st)
	L.Push(h)
	L.Push(t.lastBody)
	if err := L.PCall(3, 0, nil); err != nil {
		return scriptErr(err)
	}
	return nil
}

// refillHeaders sets the thread's one headers table to c's headers, for a
// response() that only indexes it (argIndexed): no call can keep it, so
// no call can see it change. A server sends the same names in the same
// order response after response, and then only the values are set.
func (t *luaThread) refillHeaders(c *captured) *lua.LTable {
	same := len(c.spans) == len(t.hdrNames)
	for i, s := range c.spans {
		if !same {
			break
		}
		name, _ := t.hdrNames[i].(lua.LString)
		same = string(name) == string(c.arena[s[0]:s[1]])
	}
	if same {
		for i, s := range c.spans {
			t.hdr.RawSetString(string(t.hdrNames[i].(lua.LString)), t.intern(c.arena[s[2]:s[3]]))
		}
		return t.hdr
	}
	for _, name := range t.hdrNames {
		t.hdr.RawSetString(string(name.(lua.LString)), lua.LNil)
	}
	t.hdrNames = t.hdrNames[:0]
	if t.hdrDistinct == nil || len(t.hdrDistinct)+len(c.spans) > maxHdrDistinct {
		if t.hdrDistinct != nil {
			t.hdr = t.L.NewTable()
		}
		t.hdrDistinct = map[string]struct{}{}
	}
	for _, s := range c.spans {
		name := t.intern(c.arena[s[0]:s[1]])
		key := string(name.(lua.LString))
		t.hdrDistinct[key] = struct{}{}
		t.hdr.RawSetString(key, t.intern(c.arena[s[2]:s[3]]))
		t.hdrNames = append(t.hdrNames, name)
	}
	return t.hdr
}

// ScriptDone runs the script's done(summary, latency, requests) in its
// main state, if it defines done, and closes its states. Call it after
// writing the result: done's prints follow wrk's summary.
func (r *Result) ScriptDone() error {
	sr := r.script
	if sr == nil {
		return nil
	}
	r.script = nil
	defer sr.close()
	L := sr.main
	fn, ok := L.GetGlobal("done").(*lua.LFunction)
	if !ok {
		return nil
	}
	sum := L.NewTable()
	sum.RawSetString("duration", lua.LNumber(r.Elapsed.Microseconds()))
	sum.RawSetString("requests", lua.LNumber(r.Requests))
	sum.RawSetString("bytes", lua.LNumber(r.Bytes))
	errs := L.NewTable()
	errs.RawSetString("connect", lua.LNumber(r.Errors.Connect))
	errs.RawSetString("read", lua.LNumber(r.Errors.Read))
	errs.RawSetString("write", lua.LNumber(r.Errors.Write))
	errs.RawSetString("status", lua.LNumber(r.Status["4xx"]+r.Status["5xx"]))
	errs.RawSetString("timeout", lua.LNumber(r.Errors.Timeout))
	sum.RawSetString("errors", errs)
	if err := L.CallByParam(lua.P{Fn: fn, Protect: true}, sum, sr.newStats(L, sr.latency), sr.newStats(L, sr.rates)); err != nil {
		return scriptErr(err)
	}
	return nil
}

// countRequests counts the HTTP/1.1 requests in b, which must hold whole
// requests only: wrk pipelines what one request() returns.
func countRequests(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		end := bytes.Index(b, []byte("\r\n\r\n"))
		if end < 0 {
			return 0, errors.New("incomplete request head")
		}
		head := string(b[:end])
		b = b[end+4:]
		lines := strings.Split(head, "\r\n")
		if f := strings.Fields(lines[0]); len(f) != 3 || !strings.HasPrefix(f[2], "HTTP/1.") {
			return 0, fmt.Errorf("bad request line %.40q", lines[0])
		}
		length := 0
		for _, l := range lines[1:] {
			name, value, ok := strings.Cut(l, ":")
			if !ok {
				return 0, fmt.Errorf("header line without colon %.40q", l)
			}
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "content-length":
				v, err := strconv.Atoi(strings.TrimSpace(value))
				if err != nil || v < 0 {
					return 0, fmt.Errorf("bad content-length %.40q", value)
				}
				length = v
			case "transfer-encoding":
				return 0, errors.New("a chunked request body is not supported; set Content-Length")
			}
		}
		if len(b) < length {
			return 0, errors.New("incomplete request body")
		}
		b = b[length:]
		n++
	}
	if n == 0 {
		return 0, errors.New("empty request")
	}
	return n, nil
}
