package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// wrkPatterns are what a script that parses wrk's output looks for, one
// line each (the (?m) anchors keep a pattern to a line). Every one must
// match exactly once in both wrk's and netdoctor's output: a second
// match would be a line of netdoctor's own that a script mistakes for
// wrk's.
var wrkPatterns = map[string]string{
	"running":  `(?m)^Running (\S+) test @ (\S+)$`,
	"threads":  `(?m)^\s+(\d+) threads and (\d+) connections$`,
	"header":   `(?m)^\s+Thread Stats\s+Avg\s+Stdev\s+Max\s+\+/- Stdev$`,
	"latency":  `Latency\s+([\d.]+)(us|ms|s|m)\s+([\d.]+)(us|ms|s|m)\s+([\d.]+)(us|ms|s|m)\s+([\d.]+)%`,
	"req/sec":  `Req/Sec\s+([\d.]+)([kMGT]?)\s+([\d.]+)([kMGT]?)\s+([\d.]+)([kMGT]?)\s+([\d.]+)%`,
	"dist":     `(?m)^\s+Latency Distribution$`,
	"50%":      `(?m)^\s+50%\s+([\d.]+)(us|ms|s|m)$`,
	"75%":      `(?m)^\s+75%\s+([\d.]+)(us|ms|s|m)$`,
	"90%":      `(?m)^\s+90%\s+([\d.]+)(us|ms|s|m)$`,
	"99%":      `(?m)^\s+99%\s+([\d.]+)(us|ms|s|m)$`,
	"requests": `(\d+) requests in ([\d.]+)(us|ms|s|m), ([\d.]+)(B|KB|MB|GB) read`,
	"rps":      `Requests/sec:\s+([\d.]+)`,
	"transfer": `Transfer/sec:\s+([\d.]+)(B|KB|MB|GB)`,
}

// wrkError lines appear only when non-zero, in both.
var wrkErrorPatterns = map[string]string{
	"socket":  `Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`,
	"non-2xx": `Non-2xx or 3xx responses: (\d+)`,
}

// wrkParsed is what the patterns found in one output.
type wrkParsed map[string][]string

func parseWrk(t *testing.T, who, out string, patterns map[string]string) wrkParsed {
	t.Helper()
	p := wrkParsed{}
	for name, pat := range patterns {
		all := regexp.MustCompile(pat).FindAllStringSubmatch(out, -1)
		if len(all) != 1 {
			t.Errorf("%s: %q matched %d times, want once:\n%s", who, pat, len(all), out)
			continue
		}
		p[name] = all[0]
	}
	return p
}

// num is a submatch as a number.
func (p wrkParsed) num(t *testing.T, name string, i int) float64 {
	t.Helper()
	m := p[name]
	if len(m) <= i {
		return math.NaN()
	}
	v, err := strconv.ParseFloat(m[i], 64)
	if err != nil {
		t.Errorf("%s: %q: %v", name, m[i], err)
	}
	return v
}

var wrkScale = map[string]float64{"us": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
	"B": 1, "KB": 1024, "MB": 1024 * 1024, "GB": 1024 * 1024 * 1024}

// val is submatch i with the unit in submatch i+1: seconds, bytes, or a
// plain number.
func (p wrkParsed) val(t *testing.T, name string, i int) float64 {
	t.Helper()
	m := p[name]
	if len(m) <= i+1 {
		return math.NaN()
	}
	return p.num(t, name, i) * wrkScale[m[i+1]]
}

// wrkServer answers "hello" on /, and a 500 to every other request on
// /half.
func wrkServer(t *testing.T) *httptest.Server {
	var n atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/half" && n.Add(1)%2 == 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
		io.WriteString(w, "hello, world\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// runWrk runs the real wrk.
func runWrk(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("wrk", args...).Output()
	if err != nil {
		t.Fatalf("wrk %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// TestWrkCompatible runs wrk and netdoctor load with the same command
// line against the same server and reads both outputs as a script that
// parses wrk's would: every line is found in both, once, and the
// numbers are plausible and agree in order of magnitude.
func TestWrkCompatible(t *testing.T) {
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip("wrk not installed")
	}
	s := wrkServer(t)
	args := []string{"-t2", "-c10", "-d2", "--latency", s.URL + "/"}
	wrkOut := runWrk(t, args...)
	code, ndOut, stderr := runCLI(t, append([]string{"load"}, args...)...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, ndOut, stderr)
	}
	w := parseWrk(t, "wrk", wrkOut, wrkPatterns)
	n := parseWrk(t, "netdoctor", ndOut, wrkPatterns)
	if t.Failed() {
		return
	}
	for _, p := range []wrkParsed{w, n} {
		if p["running"][1] != "2s" || p["running"][2] != s.URL+"/" || p["threads"][1] != "2" || p["threads"][2] != "10" {
			t.Errorf("opening lines %q %q", p["running"][0], p["threads"][0])
		}
	}
	// Latency is not compared between the two beyond order of magnitude:
	// wrk 4 adds samples for coordinated omission, and the server shares
	// two CPUs with either tool.
	for _, c := range []struct {
		who string
		p   wrkParsed
	}{{"wrk", w}, {"netdoctor", n}} {
		p := c.p
		avg, stdev, max := p.val(t, "latency", 1), p.val(t, "latency", 3), p.val(t, "latency", 5)
		within := p.num(t, "latency", 7)
		if !(avg > 0 && avg <= max && max < 2 && stdev >= 0 && within > 0 && within <= 100) {
			t.Errorf("%s: latency avg %v stdev %v max %v within %v%%: %q", c.who, avg, stdev, max, within, p["latency"][0])
		}
		p50, p75, p90, p99 := p.val(t, "50%", 1), p.val(t, "75%", 1), p.val(t, "90%", 1), p.val(t, "99%", 1)
		if !(p50 > 0 && p50 <= p75 && p75 <= p90 && p90 <= p99 && p99 <= max*1.01) {
			t.Errorf("%s: percentiles %v %v %v %v, max %v", c.who, p50, p75, p90, p99, max)
		}
		reqs, secs, read := p.num(t, "requests", 1), p.val(t, "requests", 2), p.val(t, "requests", 4)
		rps, transfer := p.num(t, "rps", 1), p.val(t, "transfer", 1)
		if !(secs >= 2 && secs < 3 && reqs > 100) || math.Abs(reqs/secs-rps) > 0.02*rps || math.Abs(read/secs-transfer) > 0.02*transfer {
			t.Errorf("%s: %v requests in %vs, %v bytes read; %v req/s, %v B/s", c.who, reqs, secs, read, rps, transfer)
		}
		// Req/Sec is per thread: its mean times the threads is about
		// Requests/sec.
		if rs := p.val(t, "req/sec", 1) * 2; rs < rps/2 || rs > rps*2 {
			t.Errorf("%s: Req/Sec avg %q, times 2 threads, is far from Requests/sec %v", c.who, p["req/sec"][0], rps)
		}
		if rmax := p.val(t, "req/sec", 5); rmax < p.val(t, "req/sec", 1) {
			t.Errorf("%s: Req/Sec max below its mean: %q", c.who, p["req/sec"][0])
		}
	}
	ratio := func(what string, a, b float64) {
		if r := a / b; !(r > 0.1 && r < 10) {
			t.Errorf("%s: wrk %v, netdoctor %v: not the same order of magnitude", what, a, b)
		}
	}
	ratio("Requests/sec", w.num(t, "rps", 1), n.num(t, "rps", 1))
	ratio("Req/Sec avg", w.val(t, "req/sec", 1), n.val(t, "req/sec", 1))
	ratio("p50 latency", w.val(t, "50%", 1), n.val(t, "50%", 1))
	// The same responses: the bytes read per request agree closely.
	bpr := func(p wrkParsed) float64 { return p.val(t, "requests", 4) / p.num(t, "requests", 1) }
	if a, b := bpr(w), bpr(n); math.Abs(a-b) > 0.05*a {
		t.Errorf("bytes read per request: wrk %.1f, netdoctor %.1f", a, b)
	}

	// Non-2xx responses: half of /half's.
	args = []string{"-t1", "-c2", "-d1", s.URL + "/half"}
	w = parseWrk(t, "wrk", runWrk(t, args...), map[string]string{"non-2xx": wrkErrorPatterns["non-2xx"], "requests": wrkPatterns["requests"]})
	code, ndOut, stderr = runCLI(t, append([]string{"load"}, args...)...)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, ndOut, stderr)
	}
	n = parseWrk(t, "netdoctor", ndOut, map[string]string{"non-2xx": wrkErrorPatterns["non-2xx"], "requests": wrkPatterns["requests"]})
	for _, c := range []struct {
		who string
		p   wrkParsed
	}{{"wrk", w}, {"netdoctor", n}} {
		if bad, all := c.p.num(t, "non-2xx", 1), c.p.num(t, "requests", 1); math.Abs(bad-all/2) > 0.05*all {
			t.Errorf("%s: %v non-2xx of %v, want half", c.who, bad, all)
		}
	}
	if strings.Contains(ndOut, "Socket errors") {
		t.Errorf("Socket errors line without errors:\n%s", ndOut)
	}

	// Socket errors: a server that resets each connection once the
	// request came is a read error to both. (A closed port is not
	// comparable: wrk 4.1 then exits at once, "unable to connect".)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go resetEach(l)
	args = []string{"-t1", "-c2", "-d1", "http://" + l.Addr().String() + "/"}
	w = parseWrk(t, "wrk", runWrk(t, args...), map[string]string{"socket": wrkErrorPatterns["socket"]})
	_, ndOut, _ = runCLI(t, append([]string{"load"}, args...)...)
	n = parseWrk(t, "netdoctor", ndOut, map[string]string{"socket": wrkErrorPatterns["socket"], "rps": wrkPatterns["rps"]})
	if w.num(t, "socket", 2) == 0 || n.num(t, "socket", 2) == 0 {
		t.Errorf("read errors: wrk %q, netdoctor %q", w["socket"], n["socket"])
	}
}

// resetEach accepts connections and resets each once it has read from it.
func resetEach(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			c.(*net.TCPConn).SetLinger(0)
			c.SetReadDeadline(time.Now().Add(time.Second))
			c.Read(make([]byte, 4096))
			c.Close()
		}()
	}
}

// TestLoadWrkFlags: wrk's long flags and bare-number durations.
func TestLoadWrkFlags(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	var hdr atomic.Value
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hdr.Store(r.Header.Get("X-Wrk"))
		io.WriteString(w, "hello\n")
	}))
	defer s.Close()
	start := time.Now()
	code, stdout, stderr := runCLI(t, "load", "--threads", "1", "--connections", "2", "--duration", "1", "--timeout", "1",
		"--header", "X-Wrk: yes", "-L", s.URL)
	took := time.Since(start)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"Running 1s test @ " + s.URL + "\n", "  1 threads and 2 connections\n", "  Latency Distribution\n"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if hdr.Load() != "yes" {
		t.Errorf("--header not sent: X-Wrk %q", hdr.Load())
	}
	// A second: not a millisecond, nor a minute (30 s however busy the
	// machine).
	if took < time.Second || took > 30*time.Second {
		t.Errorf("--duration 1 took %v, want a second", took)
	}
}

// TestWrkDurationFlag: a bare number is seconds in every duration flag,
// load's and run's wrk flags as the others (check --window 5, run
// --baseline 3).
func TestWrkDurationFlag(t *testing.T) {
	for in, want := range map[string]time.Duration{"10": 10 * time.Second, "1.5": 1500 * time.Millisecond, "0": 0,
		"10s": 10 * time.Second, "2m": 2 * time.Minute, "1h": time.Hour, "500ms": 500 * time.Millisecond} {
		var d time.Duration
		if err := (wrkDurationFlag{durationFlag{&d}}).Set(in); err != nil || d != want {
			t.Errorf("%q: %v, %v; want %v", in, d, err, want)
		}
		d = 0
		if err := (durationFlag{&d}).Set(in); err != nil || d != want {
			t.Errorf("ordinary flag %q: %v, %v; want %v", in, d, err, want)
		}
	}
	for _, in := range []string{"10x", "1e3", "NaN", "Inf", "99999999999", ""} {
		var d time.Duration
		if err := (wrkDurationFlag{durationFlag{&d}}).Set(in); err == nil {
			t.Errorf("%q: accepted as %v", in, d)
		}
	}
	for _, in := range []string{"10x", "1e3", "NaN", "99999999999", ""} {
		var d time.Duration
		if err := (durationFlag{&d}).Set(in); err == nil {
			t.Errorf("ordinary flag %q: accepted as %v", in, d)
		}
	}
	for in, want := range map[string]int{"50": 50, "1k": 1000, "2K": 2000, "1M": 1000000} {
		var n int
		if err := (wrkIntFlag{&n}).Set(in); err != nil || n != want {
			t.Errorf("%q: %v, %v; want %v", in, n, err, want)
		}
	}
}

// TestLoadJSONStdout: with --json - stdout is the JSON alone, and the
// text goes to stderr.
func TestLoadJSONStdout(t *testing.T) {
	t.Parallel() // beside the package's other parallel tests: they measure nothing
	s := wrkServer(t)
	var stdout, stderr bytes.Buffer
	code := Run(context.Background(), []string{"load", "-d", "2", "-c", "2", "-t", "1", "--json", "-", s.URL}, &stdout, &stderr)
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	var r struct {
		Command  string  `json:"command"`
		Requests uint64  `json:"requests"`
		RPS      float64 `json:"rps"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.Command != "load" || r.Requests == 0 {
		t.Errorf("stdout is not the JSON alone (%v, %+v):\n%s", err, r, stdout.String())
	}
	for _, want := range []string{"Running 2s test @ ", "Requests/sec:"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}
