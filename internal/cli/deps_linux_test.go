package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// helperDeps is a backend or an API for the dependency tests, on
// ND_ADDR, until stdin closes. ND_ADDR and ND_BACKEND are "host:port"
// or "unix:/path" (a socket file).
//
// depbackend answers each line with a line after ND_DELAY, a goroutine
// per connection: it has room for any number of requests at once.
//
// depapi serves HTTP (lines with ND_SERVE=line: a service in the middle
// of a chain); each request takes one of ND_POOL connections to
// ND_BACKEND (waiting for a free one), makes one round trip on it and,
// with ND_SPIN, first spends that long on the CPU. Asked "rt" on stdin,
// it prints "rt MEAN N": the mean of the N round trips it made to the
// backend, from its request's write to its answer's read, as it timed
// them itself (what netdoctor measures from outside, on a machine as
// busy as it was).
func helperDeps(role string) {
	// (Two values, not netAddr's call in the argument list: go vet's
	// hostport pass panics on that.)
	network, addr := netAddr(os.Getenv("ND_ADDR"))
	ln, err := net.Listen(network, addr)
	must(err)
	delay, _ := time.ParseDuration(os.Getenv("ND_DELAY"))
	spin, _ := time.ParseDuration(os.Getenv("ND_SPIN"))
	var rt func() string
	if role == "depbackend" {
		go serveLines(ln, func() error { time.Sleep(delay); return nil }) // the backend's time under test
	} else {
		n, _ := strconv.Atoi(os.Getenv("ND_POOL"))
		pool := make(chan *bufio.ReadWriter, n)
		bnet, baddr := netAddr(os.Getenv("ND_BACKEND"))
		// Each connection makes a round trip when opened (as pools check
		// theirs) and sends keepalive probes after a second of silence
		// (Go's default is 15 s): the pool sits idle through the run's
		// baseline, and a probe's ACK, after its last answer, must not
		// read as a request outstanding.
		d := net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: time.Second, Interval: time.Second, Count: 9}}
		for range n {
			c, err := d.Dial(bnet, baddr)
			must(err)
			rw := bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
			rw.WriteString("query\n")
			must(rw.Flush())
			_, err = rw.ReadString('\n')
			must(err)
			pool <- rw
		}
		var mu sync.Mutex
		var rtSum time.Duration
		var rtN int
		rt = func() string {
			mu.Lock()
			defer mu.Unlock()
			if rtN == 0 {
				return "rt 0 0"
			}
			return fmt.Sprintf("rt %d %d", rtSum/time.Duration(rtN), rtN)
		}
		ask := func() error {
			for end := time.Now().Add(spin); time.Now().Before(end); {
			}
			c := <-pool
			start := time.Now()
			c.WriteString("query\n")
			c.Flush()
			_, err := c.ReadString('\n')
			took := time.Since(start)
			pool <- c
			mu.Lock()
			rtSum += took
			rtN++
			mu.Unlock()
			return err
		}
		if os.Getenv("ND_SERVE") == "line" {
			go serveLines(ln, ask)
		} else {
			go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				if err := ask(); err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				io.WriteString(w, "ok\n")
			}))
		}
	}
	fmt.Println("ready")
	for in := bufio.NewReader(os.Stdin); ; {
		line, err := in.ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "rt" || rt == nil {
			return
		}
		fmt.Println(rt())
	}
}

// serveLines answers each line a connection of ln sends with one line,
// after work: a request/response protocol of one segment each way, as a
// cache's or a database's small queries. A connection ends when work
// fails.
func serveLines(ln net.Listener, work func() error) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			r := bufio.NewReader(c)
			for {
				if _, err := r.ReadString('\n'); err != nil || work() != nil {
					return
				}
				io.WriteString(c, "answer\n")
			}
		}()
	}
}

// netAddr is the network and address of "unix:/path" or "host:port".
func netAddr(a string) (string, string) {
	if path, ok := strings.CutPrefix(a, "unix:"); ok {
		return "unix", path
	}
	return "tcp", a
}

// pyAPI is depapi in python3: a thread per request
// (ThreadingHTTPServer), a queue of pool connections; it answers "rt" as
// depapi does (its clock includes the wait for the GIL after an answer
// arrives, a little longer than what the kernel saw).
const pyAPI = `
import os, queue, socket, sys, threading, time, http.server
host, port = os.environ["ND_ADDR"].rsplit(":", 1)
bh, bp = os.environ["ND_BACKEND"].rsplit(":", 1)
pool = queue.Queue()
for _ in range(int(os.environ["ND_POOL"])):
    s = socket.create_connection((bh, int(bp)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    pool.put((s, s.makefile("rb")))
lock, rt = threading.Lock(), [0, 0]
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        s, f = pool.get()
        start = time.monotonic_ns()
        s.sendall(b"query\n")
        f.readline()
        took = time.monotonic_ns() - start
        pool.put((s, f))
        with lock:
            rt[0] += took
            rt[1] += 1
        self.send_response(200)
        self.send_header("Content-Length", "3")
        self.end_headers()
        self.wfile.write(b"ok\n")
    def log_message(self, *a):
        pass
class S(http.server.ThreadingHTTPServer):
    request_queue_size = 1024
    daemon_threads = True
    def handle_error(self, *a):
        pass
srv = S((host, int(port)), H)
print("ready", flush=True)
threading.Thread(target=srv.serve_forever, daemon=True).start()
for line in sys.stdin:
    if line.strip() != "rt":
        break
    with lock:
        print("rt %d %d" % (rt[0] // max(rt[1], 1), rt[1]), flush=True)
`

// depRun builds a backend answering after delay and an API with a pool
// of 4 connections to it in the lab's server namespace (the API in Go,
// or in python3 with py), and runs netdoctor against the API.
// The API is returned to ask its round trips (apiNear).
func depRun(t *testing.T, e *lab.Env, py bool, delay, spin time.Duration, args string) (*runJSON, string, *helperProc) {
	t.Helper()
	return depRunAt(t, e, e.ServerNS.Name, e.ServerIP+":7300", py, delay, spin, args+" --server-netns "+e.ServerNS.Name)
}

// depRunAt is depRun with the backend at address backend in namespace
// backendNS; args say how to observe the server.
func depRunAt(t *testing.T, e *lab.Env, backendNS, backend string, py bool, delay, spin time.Duration, args string) (*runJSON, string, *helperProc) {
	t.Helper()
	api, h := depStartAPI(t, e, backendNS, backend, py, delay, spin)
	_, r, text := runIn(t, e.ClientNS.Name, "runremote", args+" --baseline 1s --tail 1s http://"+api+"/")
	return r, text, h
}

// depStart starts the backend and the API, and returns the API's
// address.
func depStart(t *testing.T, e *lab.Env, backendNS, backend string, py bool, delay, spin time.Duration) string {
	t.Helper()
	api, _ := depStartAPI(t, e, backendNS, backend, py, delay, spin)
	return api
}

// depStartAPI is depStart that also returns the API's process, to ask it
// its round trips (apiRoundTrip, apiNear).
func depStartAPI(t *testing.T, e *lab.Env, backendNS, backend string, py bool, delay, spin time.Duration) (string, *helperProc) {
	t.Helper()
	api := e.ServerIP + ":8080"
	startHelper(t, backendNS, "depbackend", "ND_ADDR="+backend, "ND_DELAY="+delay.String())
	env := []string{"ND_ADDR=" + api, "ND_BACKEND=" + backend, "ND_POOL=4", "ND_SPIN=" + spin.String()}
	if py {
		if _, err := exec.LookPath("python3"); err != nil {
			t.Skip("needs python3")
		}
		script := filepath.Join(t.TempDir(), "api.py")
		if err := os.WriteFile(script, []byte(pyAPI), 0o644); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", e.ServerNS.Name, "python3", script)
		cmd.Env = append(os.Environ(), env...)
		return api, startReady(t, cmd)
	}
	return api, startHelper(t, e.ServerNS.Name, "depapi", env...)
}

// apiRoundTrip asks the Go API its own mean round trip to the backend
// and how many it made.
func apiRoundTrip(t *testing.T, h *helperProc) (time.Duration, int) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "rt\n"); err != nil {
		t.Fatal(err)
	}
	line, err := h.out.ReadString('\n')
	var mean time.Duration
	var n int
	if _, serr := fmt.Sscanf(line, "rt %d %d", &mean, &n); err != nil || serr != nil {
		t.Fatalf("the API said %q (%v, %v), want its round trips", line, err, serr)
	}
	return mean, n
}

// apiNear is whether netdoctor's round trip got is within 25 % of the
// API's own mean, and that mean. On a quiet machine the mean is the
// backend's nominal delay; on a busy one longer (the backend's and the
// API's wake-ups wait for a CPU: 30 ms for a 20 ms backend with both CPUs
// taken 30 ms in every 100), never shorter, which the test checks first.
func apiNear(t *testing.T, h *helperProc, nominal, got time.Duration) (time.Duration, bool) {
	t.Helper()
	truth, n := apiRoundTrip(t, h)
	if n == 0 || truth < nominal*9/10 {
		t.Fatalf("the API timed %d round trips of %v, want %v at least", n, truth, nominal)
	}
	return truth, got >= truth*3/4 && got <= truth*5/4
}

// testRunDependencyPool: an API with 4 connections to a backend that
// answers in 20 ms, under 50 connections: the pool is full, requests
// queue for a connection. The finding names the backend's address and
// owner, the pool and the time per round trip within 25 % of the API's
// own clock, in Go
// (goroutines, no thread per request) and in python3 (threads).
func testRunDependencyPool(t *testing.T) {
	for _, py := range []bool{false, true} {
		t.Run(map[bool]string{false: "go", true: "python"}[py], func(t *testing.T) {
			e := newLab(t)
			r, text, h := depRun(t, e, py, 20*time.Millisecond, 0, "-c 50 -t 1 -d 4s --timeout 5s")
			f := wantActive(t, r, text, "server", rules.DependencyPoolSaturated)[rules.DependencyPoolSaturated]
			if f == nil {
				t.Fatalf("servers: %s", jsonOf(r.Servers))
			}
			backend := e.ServerIP + ":7300"
			owner := "(pid "
			if !strings.Contains(f.Title, backend) || !strings.Contains(f.Title, owner) || !strings.Contains(f.Title, ": 4 connections") {
				t.Errorf("title %q", f.Title)
			}
			d := dependencyOf(r, backend)
			if d == nil {
				t.Fatalf("no dependency %s: %s", backend, jsonOf(r.Servers))
			}
			truth, near := apiNear(t, h, 20*time.Millisecond, d.RoundTrip)
			t.Logf("%s: %d conns, busy %.2f, %.0f round trips/s, %v per round trip (the API's clock: %v), pipelined %.2f", d.Addr, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, truth, d.Pipelined)
			if d.Conns != 4 || !near || d.Owner == "" || !d.Observed {
				t.Errorf("dependency %+v, want 4 connections, %v ± 25 %%, owner observed", d, truth)
			}
			if findActive(r, rules.AppSlow) != nil {
				t.Errorf("app-slow beside the dependency's finding")
			}
		})
	}
}

// testRunDependencyLong: round trips longer than the interval between
// looks (a backend answering in 400 ms) are timed one by one, from each
// request's send to its answer as tcp_info dates them, the requests
// already outstanding when the trace began included: within 10 % of the
// mean the API timed itself (400 ms on a quiet machine, longer when the
// backend's wake-ups wait for a CPU, as on a shared CI machine). The load
// lasts 5 s so that each connection carries the 8 requests its lattice
// needs (minLatticeRequests) even when those requests take a fifth
// longer: over 3 s, 440 ms round trips gave 7 and none were timed.
func testRunDependencyLong(t *testing.T) {
	e := newLab(t)
	backend := e.ServerIP + ":7300"
	api, h := depStartAPI(t, e, e.ServerNS.Name, backend, false, 400*time.Millisecond, 0)
	_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 8 -t 1 -d 5s --timeout 5s --server-netns "+e.ServerNS.Name+" --baseline 1s --tail 1s http://"+api+"/")
	truth, n := apiRoundTrip(t, h)
	d := dependencyOf(r, backend)
	if d == nil {
		t.Fatalf("no dependency: %s\n%s", jsonOf(r.Servers), text)
	}
	t.Logf("%s: %d conns, busy %.2f, %.1f round trips/s, %v per round trip, %d timed one by one; the API timed %d: %v", d.Addr, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, d.RoundTripsTimed, n, truth)
	if truth < 400*time.Millisecond || n < 16 {
		t.Fatalf("the API timed %d round trips of %v: want 16 of 400 ms at least", n, truth)
	}
	if d.Conns != 4 || d.RoundTrip < truth*9/10 || d.RoundTrip > truth*11/10 || d.RoundTripsTimed < 16 {
		t.Errorf("dependency %+v, want 4 connections, %v ± 10 %%, 16 timed one by one at least", d, truth)
	}
}

// TestRunDependencyQuiet: with a fast backend, or with an API whose time
// is its own CPU, the dependency is not blamed; the idle pool's
// keepalive probes before the load do not make it busy.
func TestRunDependencyQuiet(t *testing.T) {
	for _, c := range []struct {
		name        string
		delay, spin time.Duration
	}{{"fast backend", 0, 0}, {"api on cpu", 0, 20 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			e := newLab(t)
			r, text, _ := depRun(t, e, false, c.delay, c.spin, "-c 50 -t 1 -d 3s --timeout 5s")
			for _, id := range []report.FindingID{rules.DependencyPoolSaturated, rules.DependencySlow} {
				if f := findActive(r, id); f != nil {
					t.Errorf("%s: %s\n%s", id, f.Title, text)
				}
			}
			d := dependencyOf(r, e.ServerIP+":7300")
			if d == nil {
				t.Fatalf("the backend is not in the dependency table: %s", jsonOf(r.Servers))
			}
			t.Logf("p50 %v; %+v", r.Load.Latency.P50, *d)
			// The API on CPU holds a connection for one fast round trip
			// per request, some 120 a second: 2 % busy measured. A
			// keepalive probe's ACK in its first look read it 75 %.
			if c.spin > 0 && d.Busy > 0.2 {
				t.Errorf("the pool read %.0f %% busy, want a few", 100*d.Busy)
			}
		})
	}
}

func dependencyOf(r *runJSON, addr string) *app.Dependency {
	for _, s := range r.Servers {
		for i := range s.Deps {
			if s.Deps[i].Addr == addr {
				return &s.Deps[i]
			}
		}
	}
	return nil
}

// testRunDependencyElsewhere: the backend listens in a third namespace,
// joined to the server's by a veth of its own. The finding still names
// its address and its owner, with the namespace it is in, the pool and
// the time per round trip within 25 % of the API's clock; the backend is
// observed as a server of the run.
func testRunDependencyElsewhere(t *testing.T) {
	e := newLab(t)
	ns, ip, err := e.AddDepNS()
	if err != nil {
		t.Fatal(err)
	}
	backend := ip + ":7300"
	r, text, h := depRunAt(t, e, ns.Name, backend, false, 20*time.Millisecond, 0, "-c 50 -t 1 -d 4s --timeout 5s --server-netns "+e.ServerNS.Name)
	f := wantActive(t, r, text, "server", rules.DependencyPoolSaturated)[rules.DependencyPoolSaturated]
	if f == nil {
		t.Fatalf("servers: %s", jsonOf(r.Servers))
	}
	owner := "(pid "
	where := "netns " + ns.Name + ")"
	if !strings.Contains(f.Title, backend) || !strings.Contains(f.Title, owner) || !strings.Contains(f.Title, where) || !strings.Contains(f.Title, ": 4 connections") {
		t.Errorf("title %q, want %s, its owner in %s and 4 connections", f.Title, backend, where)
	}
	d := dependencyOf(r, backend)
	if d == nil {
		t.Fatalf("no dependency %s: %s", backend, jsonOf(r.Servers))
	}
	truth, near := apiNear(t, h, 20*time.Millisecond, d.RoundTrip)
	t.Logf("%s (%s): %d conns, busy %.2f, %.0f round trips/s, %v per round trip (the API's clock: %v)", d.Addr, d.Owner, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, truth)
	if d.Conns != 4 || !near || !strings.Contains(d.Owner, where) || !d.Observed || d.OtherHost {
		t.Errorf("dependency %+v, want 4 connections, %v ± 25 %%, owner in %s, observed", d, truth, ns)
	}
}

// testRunDependencyAgent: the API in the server's namespace, the
// server's side through an agent there, and the backend beside the API
// or in a third namespace on the same host. The agent traces the API's
// connections for the load and returns them with the servers: the
// finding names the backend's address and owner (with its namespace when
// it is another), the pool and the time per round trip within 25 % of the
// API's clock, and the backend is observed as a server of the run.
func testRunDependencyAgent(t *testing.T) {
	for _, elsewhere := range []bool{false, true} {
		t.Run(map[bool]string{false: "same-netns", true: "other-netns"}[elsewhere], func(t *testing.T) {
			e := newLab(t)
			backendNS, backendIP, where := e.ServerNS.Name, e.ServerIP, "(pid "
			if elsewhere {
				ns, ip, err := e.AddDepNS()
				if err != nil {
					t.Fatal(err)
				}
				backendNS, backendIP, where = ns.Name, ip, "netns "+ns.Name+")"
			}
			backend := backendIP + ":7300"
			api, h := depStartAPI(t, e, backendNS, backend, false, 20*time.Millisecond, 0)
			url, tok, _, err := e.StartAgent(context.Background())
			labMust(t, err)
			_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 50 -t 1 -d 4s --timeout 5s --baseline 1s --tail 1s --server-agent "+url+" --token-file "+tok+" http://"+api+"/")
			f := wantActive(t, r, text, "server", rules.DependencyPoolSaturated)[rules.DependencyPoolSaturated]
			if f == nil {
				t.Fatalf("servers: %s", jsonOf(r.Servers))
			}
			if !strings.Contains(f.Title, backend) || !strings.Contains(f.Title, "(pid ") || !strings.Contains(f.Title, where) || !strings.Contains(f.Title, ": 4 connections") {
				t.Errorf("title %q, want %s, its owner %s… and 4 connections", f.Title, backend, where)
			}
			d := dependencyOf(r, backend)
			if d == nil {
				t.Fatalf("no dependency %s: %s", backend, jsonOf(r.Servers))
			}
			truth, near := apiNear(t, h, 20*time.Millisecond, d.RoundTrip)
			t.Logf("%s (%s): %d conns, busy %.2f, %.0f round trips/s, %v per round trip (the API's clock: %v) over %.1f s", d.Addr, d.Owner, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, truth, d.Seconds)
			if d.Conns != 4 || !near || !strings.Contains(d.Owner, where) || !d.Observed || d.OtherHost {
				t.Errorf("dependency %+v, want 4 connections, %v ± 25 %%, owner %s…, observed", d, truth, where)
			}
			// The trace follows the load, not the watch: the baseline
			// before it and the tail after it do not count.
			if d.Seconds > 4.5 || d.Busy < 0.8 {
				t.Errorf("traced %.1f s, busy %.2f: want the 4 s load only", d.Seconds, d.Busy)
			}
			var observed bool
			for _, s := range r.Servers {
				observed = observed || s.Role == "dependency" && s.Addr == backend
			}
			if !observed {
				t.Errorf("the backend is not a server of the run: %s", jsonOf(r.Servers))
			}
		})
	}
}

// pyPoolBackend answers each line with a line after ND_DELAY_S seconds
// off the CPU, from a fixed pool of ND_WORKERS threads, as a thread-pool
// server (Java NIO with an executor, a hand-made Python one) does: one
// thread waits in epoll and hands a readable connection to the pool,
// where the request is read and answered. With more requests than
// workers they wait unread in their connections.
const pyPoolBackend = `
import os, queue, select, socket, sys, threading, time
host, port = os.environ["ND_ADDR"].rsplit(":", 1)
delay = float(os.environ["ND_DELAY_S"])
ln = socket.create_server((host, int(port)), backlog=1024)
ln.setblocking(False)
ep = select.epoll()
ep.register(ln.fileno(), select.EPOLLIN)
conns, work = {}, queue.Queue()
def worker():
    while True:
        c = work.get()
        try:
            data = c.recv(4096)
        except OSError:
            data = b""
        if not data:
            c.close()
            continue
        time.sleep(delay)
        c.sendall(b"answer\n")
        ep.modify(c.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
for _ in range(int(os.environ["ND_WORKERS"])):
    threading.Thread(target=worker, daemon=True).start()
def loop():
    while True:
        for fd, _ in ep.poll():
            if fd == ln.fileno():
                try:
                    c, _ = ln.accept()
                except BlockingIOError:
                    continue
                conns[c.fileno()] = c
                ep.register(c.fileno(), select.EPOLLIN | select.EPOLLONESHOT)
            else:
                work.put(conns[fd])
threading.Thread(target=loop, daemon=True).start()
print("ready", flush=True)
select.select([sys.stdin], [], [])
`

// testRunDependencyChain: a Go API with 8 connections to a python3
// backend whose 2 worker threads each spend 20 ms on a request. The
// API's pool is busy all the time because the backend's is full: the
// backend is diagnosed as a server of the run (worker-pool-exhausted),
// the API's dependency-pool-saturated is its consequence (the text and
// HTML name it from caused_by and cause_subject: the goldens), its round
// trip is the backend's queue and service (~80 ms, within 25 % of the
// API's clock), and the fix is not a bigger pool.
func testRunDependencyChain(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("needs python3")
	}
	e := newLab(t)
	backend, api := e.ServerIP+":7300", e.ServerIP+":8080"
	script := filepath.Join(t.TempDir(), "backend.py")
	if err := os.WriteFile(script, []byte(pyPoolBackend), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", e.ServerNS.Name, "python3", script)
	cmd.Env = append(os.Environ(), "ND_ADDR="+backend, "ND_DELAY_S=0.02", "ND_WORKERS=2")
	startReady(t, cmd)
	h := startHelper(t, e.ServerNS.Name, "depapi", "ND_ADDR="+api, "ND_BACKEND="+backend, "ND_POOL=8", "ND_SPIN=0s")
	_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 50 -t 1 -d 4s --timeout 5s --server-netns "+e.ServerNS.Name+" --baseline 1s --tail 1s http://"+api+"/")
	got := wantActive(t, r, text, "server", rules.DependencyPoolSaturated, rules.WorkerPoolExhausted)
	dep, pool := got[rules.DependencyPoolSaturated], got[rules.WorkerPoolExhausted]
	if dep == nil || pool == nil {
		t.Fatalf("servers: %s", jsonOf(r.Servers))
	}
	if !strings.HasSuffix(pool.Subject, backend) || !strings.Contains(pool.Title, "pool of 2 workers") {
		t.Errorf("the backend's pool: %s: %s", pool.Subject, pool.Title)
	}
	if dep.CausedBy != rules.WorkerPoolExhausted || dep.CauseSubject != pool.Subject {
		t.Errorf("%s (%s) is caused by %q %q, want the backend's %s", dep.ID, dep.Subject, dep.CausedBy, dep.CauseSubject, pool.Subject)
	}
	d := dependencyOf(r, backend)
	if d == nil {
		t.Fatalf("no dependency %s: %s", backend, jsonOf(r.Servers))
	}
	// 8 requests at the backend, 2 served at a time for 20 ms each: each
	// waits for 3 others and its own, 80 ms.
	truth, near := apiNear(t, h, 80*time.Millisecond, d.RoundTrip)
	t.Logf("%s (%s): %d conns, busy %.2f, %.0f round trips/s, %v per round trip (the API's clock: %v)", d.Addr, d.Owner, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, truth)
	if d.Conns != 8 || d.Busy < 0.9 || !near {
		t.Errorf("dependency %+v, want 8 connections busy ≥ 90 %%, %v ± 25 %% per round trip", d, truth)
	}
	if len(dep.Fix) == 0 || !strings.HasPrefix(dep.Fix[0], "not a bigger pool") {
		t.Errorf("fix %q: the backend has no room for more requests at once", dep.Fix)
	}
}
