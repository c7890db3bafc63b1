package cli

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// startFront starts a front with a pool of n connections to backend in
// the lab's server namespace, listening at addr: the Go helper
// (http.Transport's MaxConnsPerHost) or Node.js (an http.Agent's
// maxSockets, on one event loop).
func startFront(t *testing.T, e *lab.Env, kind, addr, backend, n string) *helperProc {
	t.Helper()
	env := []string{"ND_ADDR=" + addr, "ND_BACKEND=" + backend, "ND_POOL=" + n}
	if kind == "go" {
		return startHelper(t, e.ServerNS.Name, "httpfront", env...)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("needs node (Node.js) for an event-loop front")
	}
	script := filepath.Join(t.TempDir(), "front.js")
	if err := os.WriteFile(script, []byte(nodeFront), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", e.ServerNS.Name, node, script)
	cmd.Env = append(os.Environ(), env...)
	return startReady(t, cmd)
}

// TestRunDependencyAnswerParts: a Go front and a Node.js front (an event
// loop), each with a pool of 4 keep-alive connections to an HTTP backend
// that writes each answer in several writes — its headers at once, its
// body 20 ms later in three writes — under 50 connections. The pool is
// busy ~100 % and its time per request is the one the front measured
// over the run (from a connection's handover to the answer's last byte)
// within 10 %. With Nagle on the backend's sockets, its body waits for
// the front's delayed ACK of the headers (~40 ms a request instead of
// 20): the stall is named on the backend's side, read on its sockets, as
// the cause of the pool's finding; without, nothing names it. A run
// during which other work saturated the host's CPUs, or in which the
// front's own clock ran more than 5 % over the backend's without Nagle
// (an event loop starved of CPU holds its connections idle, and times
// its own delays into its calls), is run again once.
//
// Not in TestLight: beside another, Node's event loop fell behind
// and its agent replaced connections mid-run (a pool 82 % busy, once in
// five paired runs).
func TestRunDependencyAnswerParts(t *testing.T) {
	for _, front := range []string{"go", "node"} {
		for _, nagle := range []bool{false, true} {
			name := front + map[bool]string{false: "-nodelay", true: "-nagle"}[nagle]
			t.Run(name, func(t *testing.T) {
				e := newLab(t)
				backend, api := e.ServerIP+":7300", e.ServerIP+":8080"
				nd := map[bool]string{false: "1", true: "0"}[nagle]
				back := startHelper(t, e.ServerNS.Name, "httpbackend", "ND_ADDR="+backend, "ND_DELAY=20ms", "ND_PARTS=3", "ND_NODELAY="+nd)
				fr := startFront(t, e, front, api, backend, "4")
				for attempt := 1; ; attempt++ {
					problems, saturated := answerParts(t, e, fr, back, backend, api, nagle)
					if len(problems) == 0 {
						return
					}
					if attempt == 1 && saturated {
						t.Logf("the host's CPUs were saturated during the run, again: %s", strings.Join(problems, "; "))
						continue
					}
					for _, p := range problems {
						t.Error(p)
					}
					return
				}
			})
		}
	}
}

// answerParts runs netdoctor against the front and says what does not
// hold, and whether the host's CPUs were saturated meanwhile.
func answerParts(t *testing.T, e *lab.Env, fr, back *helperProc, backend, api string, nagle bool) (problems []string, saturated bool) {
	t.Helper()
	n0, m0, err := helperStats(fr)
	if err != nil {
		t.Fatal(err)
	}
	_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 50 -t 1 -d 4s --timeout 5s --server-netns "+e.ServerNS.Name+" --baseline 1s --tail 1s http://"+api+"/")
	n1, m1, err := helperStats(fr)
	if err != nil {
		t.Fatal(err)
	}
	if n1 <= n0 {
		t.Fatalf("the front made no call: %d then %d", n0, n1)
	}
	// The front's own mean over this run's calls.
	truth := time.Duration((float64(n1)*float64(m1) - float64(n0)*float64(m0)) / float64(n1-n0))
	_, own, _ := helperStats(back)
	everyActiveHasWindowEvidence(t, r)
	// Starved: the host's CPUs saturated, or, without Nagle (whose stall
	// the front's clock holds and the backend's does not), the front's
	// own clock more than 5 % over the backend's (21.8 ms against 20.6
	// in a CI run where Node's pool read 80 % busy; 20.9 against 20.5 on
	// a quiet machine): the front came round to its answers late.
	saturated = findActive(r, rules.CPUSaturated) != nil || !nagle && truth > own*105/100
	bad := func(format string, a ...any) { problems = append(problems, fmt.Sprintf(format, a...)) }
	d := dependencyOf(r, backend)
	if d == nil {
		bad("no dependency %s: %s\n%s", backend, jsonOf(r.Servers), text)
		return problems, saturated
	}
	t.Logf("%s: %d conns, busy %.2f, %.0f round trips/s, %v per round trip (%d timed one by one); the front timed %d calls at %v, the backend its own answers at %v; nagle %+v",
		d.Addr, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, d.RoundTripsTimed, n1-n0, truth.Round(time.Microsecond), own, d.Nagle)
	if d.Conns != 4 || d.Untimed != "" || d.Busy < 0.9 {
		bad("dependency %+v, want 4 connections busy ≥ 90 %%", d)
	}
	if off := math.Abs(float64(d.RoundTrip-truth)) / float64(truth); off > 0.1 {
		bad("%v per round trip, the front's own %v: %.0f %% off, want within 10 %%", d.RoundTrip, truth, 100*off)
	}
	sat := findActive(r, rules.DependencyPoolSaturated)
	if sat == nil {
		bad("no active %s; findings %v\n%s", rules.DependencyPoolSaturated, ids(r), text)
	}
	stall := findActive(r, rules.NagleDelayedACK)
	if !nagle {
		if stall != nil {
			bad("Nagle named with TCP_NODELAY on: %s", stall.Title)
		}
		return problems, saturated
	}
	if stall == nil {
		bad("the stall is not named; findings %v\n%s", ids(r), text)
		return problems, saturated
	}
	if !strings.HasSuffix(stall.Subject, " → "+backend) || !strings.Contains(stall.Title, "Nagle") || len(stall.Fix) == 0 || !strings.HasPrefix(stall.Fix[0], "on "+backend) {
		bad("stall %s: %s, fix %q: want the backend's side named", stall.Subject, stall.Title, stall.Fix)
	}
	if !evidenceHas(stall, "TCP_NODELAY on "+backend+"'s sockets that held answers: off") {
		bad("the backend's TCP_NODELAY is not read: %+v", stall.Evidence)
	}
	if sat != nil && (sat.CausedBy != rules.NagleDelayedACK || sat.CauseSubject != stall.Subject) {
		bad("%s is caused by %q %q, want the stall", sat.ID, sat.CausedBy, sat.CauseSubject)
	}
	return problems, saturated
}

// ids lists a report's findings, status and ID.
func ids(r *runJSON) string {
	var out []string
	for _, f := range r.Findings {
		out = append(out, string(f.Status)+" "+string(f.ID)+" "+f.Subject)
	}
	return strings.Join(out, ", ")
}

// TestRunDependencyRoomy: a roomy pool (64 connections for 50 clients)
// to a fast backend writing its answers in parts, behind the Go and the
// Node.js front: no dependency, Nagle or pool finding.
func TestRunDependencyRoomy(t *testing.T) {
	for _, front := range []string{"go", "node"} {
		t.Run(front, func(t *testing.T) {
			e := newLab(t)
			backend, api := e.ServerIP+":7300", e.ServerIP+":8080"
			startHelper(t, e.ServerNS.Name, "httpbackend", "ND_ADDR="+backend, "ND_DELAY=0s", "ND_PARTS=3", "ND_NODELAY=1")
			startFront(t, e, front, api, backend, "64")
			_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 50 -t 1 -d 3s --timeout 5s --server-netns "+e.ServerNS.Name+" --baseline 1s --tail 1s http://"+api+"/")
			for _, id := range []report.FindingID{rules.DependencyPoolSaturated, rules.DependencySlow, rules.NagleDelayedACK, rules.WorkerPoolExhausted} {
				if f := findActive(r, id); f != nil {
					t.Errorf("%s: %s\n%s", id, f.Title, text)
				}
			}
			if d := dependencyOf(r, backend); d != nil {
				t.Logf("p50 %v; %s: %d conns, busy %.2f, %v per round trip", r.Load.Latency.P50, d.Addr, d.Conns, d.Busy, d.RoundTrip)
			}
		})
	}
}

// TestRunPoolJVM: a JVM service (com.sun.net.httpserver) whose requests
// run on Executors.newFixedThreadPool(4), each holding its worker 20 ms
// off the CPU (Thread.sleep: a futex with a timeout, as its idle
// workers' queue wait is a futex without one), under 50 connections:
// worker-pool-exhausted names the pool from its threads
// (pool-1-thread-*), its size and the JDK executor as the knob, not
// counting the JVM's own threads (GC, compilers, VM, the HTTP
// dispatcher). With 64 workers nothing is raised.
func TestRunPoolJVM(t *testing.T) {
	java, err1 := exec.LookPath("java")
	javac, err2 := exec.LookPath("javac")
	if err1 != nil || err2 != nil {
		t.Skip("needs java and javac (a JDK) for a JVM service")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Svc.java"), []byte(javaService), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(javac, "-d", dir, filepath.Join(dir, "Svc.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	for _, workers := range []string{"4", "64"} {
		t.Run(workers+"-workers", func(t *testing.T) {
			e := newLab(t)
			api := e.ServerIP + ":8080"
			cmd := exec.Command("ip", "netns", "exec", e.ServerNS.Name, java, "-Xmx64m", "-cp", dir, "Svc")
			cmd.Env = append(os.Environ(), "ND_ADDR="+api, "ND_WORKERS="+workers, "ND_DELAY_MS=20")
			startReady(t, cmd)
			_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 50 -t 1 -d 4s --timeout 5s --server-netns "+e.ServerNS.Name+" --baseline 1s --tail 1s http://"+api+"/")
			f := findActive(r, rules.WorkerPoolExhausted)
			if workers == "64" {
				if f != nil {
					t.Errorf("a roomy pool: %s\n%s", f.Title, text)
				}
				return
			}
			f = wantActive(t, r, text, "server", rules.WorkerPoolExhausted)[rules.WorkerPoolExhausted]
			if f == nil {
				t.Fatalf("servers: %s", jsonOf(r.Servers))
			}
			t.Logf("%s: %s\n%q", f.Subject, f.Title, f.Fix)
			// The JVM listens on an IPv6 socket: ::ffff:10.x.y.z.
			if !strings.HasSuffix(f.Subject, e.ServerIP+":8080") && !strings.HasSuffix(f.Subject, e.ServerIP+"]:8080") || !strings.Contains(f.Title, "pool of 4 threads (pool-1-thread-*)") {
				t.Errorf("title %q: want the pool of 4 named", f.Title)
			}
			if len(f.Fix) == 0 || !strings.Contains(f.Fix[0], "Executors.newFixedThreadPool") {
				t.Errorf("fix %q: want the JDK executor named", f.Fix)
			}
			if !evidenceHas(f, "a timed wait") {
				t.Errorf("evidence %+v: want what each worker waits on", f.Evidence)
			}
		})
	}
}
