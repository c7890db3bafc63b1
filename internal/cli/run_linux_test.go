package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// loadJSON is the load part of a run report.
type loadJSON = load.Result

type runJSON struct {
	Verdict   string              `json:"verdict"`
	Findings  []report.Finding    `json:"findings"`
	Load      *loadJSON           `json:"load"`
	LoadNotes []string            `json:"load_notes"`
	Partial   bool                `json:"partial"`
	Path      *evidence.PathProbe `json:"path"`
	Sides     []struct {
		Name     string `json:"name"`
		Observed bool   `json:"observed"`
		Lost     string `json:"lost"`
		Agent    string `json:"agent"`
	} `json:"sides"`
	Servers []*app.Server `json:"servers"`
	// The servers' CPU: their profile during the load, or why none, and
	// where the requests' time went.
	Profile      *cpuprof.Summary  `json:"profile"`
	ProfileError string            `json:"profile_error"`
	TimeSplit    *report.TimeSplit `json:"latency_split"`
}

// runInNetns runs `netdoctor run` inside a fresh namespace against a
// server of the given kind that the same process starts there, and
// returns its exit code, report and text.
func runInNetns(t *testing.T, server, args string) (int, *runJSON, string) {
	t.Helper()
	return runIn(t, testNetns(t), "run", args, "ND_SERVER="+server)
}

// runRemote runs `netdoctor run` in namespace ns against a server
// elsewhere and returns the report and the text printed beside it.
func runRemote(t *testing.T, ns, args string) (*runJSON, string) {
	t.Helper()
	_, r, text := runIn(t, ns, "runremote", args)
	return r, text
}

// runIn runs `netdoctor run ARGS --json -` through the test binary's
// helper role in namespace ns and decodes the report.
func runIn(t *testing.T, ns, role, args string, env ...string) (int, *runJSON, string) {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	cmd.Env = append(append(os.Environ(), "ND_HELPER="+role, "ND_RUN_ARGS=run --json - "+args), env...)
	// With --json - stdout is the report alone; the text is on stderr.
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	out := stdout.Bytes()
	if !bytes.HasPrefix(bytes.TrimSpace(out), []byte("{")) {
		t.Fatalf("no JSON report alone on stdout (exit %d):\n%s\nstderr:\n%s", code, out, stderr.String())
	}
	var r runJSON
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return code, &r, stderr.String()
}

func findActive(r *runJSON, id report.FindingID) *report.Finding {
	for i := range r.Findings {
		if r.Findings[i].ID == id && r.Findings[i].Status == report.Active {
			return &r.Findings[i]
		}
	}
	return nil
}

// testRunAcceptQueue: a server with backlog 8 accepting every 20 ms under
// 100 connections: run must report the accept-queue overflow, seen during
// the load, with the listener named.
func testRunAcceptQueue(t *testing.T) {
	page := filepath.Join(t.TempDir(), "run.html")
	if p := os.Getenv("ND_KEEP_HTML"); p != "" {
		page = p
	}
	code, r, text := runInNetns(t, "slow", "-c 100 -t 1 -d 3s --baseline 1s --tail 1s --html "+page)
	everyActiveHasWindowEvidence(t, r)
	f := findActive(r, "accept-queue-overflow")
	if code != ExitFindings || f == nil {
		t.Fatalf("exit %d, findings %+v; want active accept-queue-overflow\n%s", code, r.Findings, text)
	}
	if f.Subject != "127.0.0.1:7200" || f.Side != "local" {
		t.Errorf("finding subject %q side %q", f.Subject, f.Side)
	}
	window := false
	for _, e := range f.Evidence {
		window = window || (e.Window && strings.Contains(e.Text, "TcpExtListenOverflows +"))
	}
	if !window || r.Load.Requests == 0 {
		t.Errorf("evidence %+v, requests %d: want ListenOverflows from the load window", f.Evidence, r.Load.Requests)
	}
	if !strings.HasPrefix(r.Verdict, "UNHEALTHY: Accept queue overflow") {
		t.Errorf("verdict %q", r.Verdict)
	}
	checkHTML(t, page)
}

// checkHTML opens the HTML report in headless Chromium and checks that
// every chart drew its lines (the page's script marks each canvas with
// the number of points drawn) and that the findings are on the page.
func checkHTML(t *testing.T, page string) {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "http://") && strings.Contains(string(b), "<script src") {
		t.Errorf("the page fetches scripts from the network")
	}
	dom := []byte(renderHTML(t, page))
	canvases := strings.Count(string(dom), "<canvas class=\"chart\" data-series")
	drawn := regexp.MustCompile(`data-drawn="([1-9][0-9]*)"`).FindAllStringSubmatch(string(dom), -1)
	if canvases < 3 || len(drawn) != canvases {
		t.Errorf("%d canvases, %d drawn", canvases, len(drawn))
	}
	if !strings.Contains(string(dom), "accept-queue-overflow") {
		t.Errorf("the page does not show the finding")
	}
}

// renderHTML opens a page in headless Chromium, as a phone's screen
// shows it, and returns the DOM its scripts made.
func renderHTML(t *testing.T, page string) string {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium not installed (scripts/deps.sh installs it): the page was written but not rendered")
	}
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+t.TempDir(), "--window-size=412,900", "--dump-dom", "file://"+page)
	dom, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return string(dom)
}

// TestRunHealthy: a fast server with the default backlog gets no
// critical finding.
func TestRunHealthy(t *testing.T) {
	code, r, text := runInNetns(t, "fast", "-c 20 -t 1 -d 2s --baseline 1s --tail 1s")
	for _, f := range r.Findings {
		if f.Severity == report.Critical {
			t.Errorf("critical finding on a healthy server: %s %s %+v", f.ID, f.Title, f.Evidence)
		}
	}
	if code != ExitOK || r.Load.Requests == 0 || len(r.Sides) != 2 || !r.Sides[0].Observed {
		t.Errorf("exit %d, requests %d, sides %+v\n%s", code, r.Load.Requests, r.Sides, text)
	}
}

// testRunServerNetns: netdoctor runs in the client namespace and observes
// the server's through --server-netns, across a veth.
func testRunServerNetns(t *testing.T) {
	e := newLab(t)
	client, server, addr := e.ClientNS.Name, e.ServerNS.Name, e.ServerIP+":7300"
	startServe(t, server, "ND_SERVER=slow", "ND_ADDR="+addr)
	r, text := runRemote(t, client, "-c 100 -t 1 -d 3s --baseline 1s --tail 1s --server-netns "+server+" http://"+addr+"/")
	everyActiveHasWindowEvidence(t, r)
	f := findActive(r, "accept-queue-overflow")
	if f == nil || f.Side != "server" || f.Subject != addr {
		t.Fatalf("want the server side's accept-queue overflow on %s; findings %+v\n%s", addr, r.Findings, text)
	}
	if len(r.Sides) != 2 || !r.Sides[0].Observed || !r.Sides[1].Observed {
		t.Errorf("sides %+v: want server and client observed", r.Sides)
	}
}

// TestRunBadServerNetns: a missing server namespace is bad input.
func TestRunBadServerNetns(t *testing.T) {
	code, _, stderr := runCLI(t, "run", "-d", "1s", "--server-netns", "no-such-ns", "http://127.0.0.1:1/")
	if code != ExitUsage || !strings.Contains(stderr, "no such network namespace: no-such-ns") {
		t.Errorf("exit %d, stderr %q", code, stderr)
	}
}

// TestRunNotListening: a target nobody listens on is one clear line, with
// what does listen there, and exit 2 without a run of refusals.
func TestRunNotListening(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	code, stdout, stderr := runCLI(t, "run", "-d", "5s", "http://127.0.0.1:1/")
	if code != ExitUsage || !strings.Contains(stderr, "nothing accepts connections on 127.0.0.1:1") ||
		!strings.Contains(stderr, ln.Addr().String()) || stdout != "" {
		t.Errorf("exit %d\nstdout %q\nstderr %q", code, stdout, stderr)
	}
}

// startServe starts a "serve" helper in ns and waits until it listens.
func startServe(t *testing.T, ns string, env ...string) *exec.Cmd {
	t.Helper()
	srv := exec.Command("ip", "netns", "exec", ns, os.Args[0])
	srv.Env = append(append(os.Environ(), "ND_HELPER=serve"), env...)
	stdin, _ := srv.StdinPipe()
	stdout, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); srv.Process.Kill(); srv.Wait() })
	buf := make([]byte, 6)
	if _, err := io.ReadFull(stdout, buf); err != nil || string(buf) != "ready\n" {
		t.Fatalf("server helper: %q %v", buf, err)
	}
	return srv
}

// testRunServerExits: the listener's owner exits mid-run; the run still
// ends on time with a report that shows the refusals.
func testRunServerExits(t *testing.T) {
	ns := testNetns(t)
	startServe(t, ns, "ND_SERVER=fast", "ND_ADDR=127.0.0.1:7400", "ND_EXIT_AFTER=1000") // requests
	start := time.Now()
	r, _ := runRemote(t, ns, "-c 10 -t 1 -d 3s --baseline 1s --tail 1s http://127.0.0.1:7400/")
	// A 5 s run, not one waiting on the dead server's connections: 30 s
	// however busy the machine.
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("run took %v after its server died", took)
	}
	if r.Load.Requests == 0 || r.Load.ErrorCauses["refused"] == 0 {
		t.Errorf("requests %d, causes %v: want successes, then refusals after the exit", r.Load.Requests, r.Load.ErrorCauses)
	}
}

// testRunNagle: a server writing headers and body separately with Nagle
// on (seed 001 §7): run must name nagle-delayed-ack with the 40 ms band and
// the delayed-ACK counter.
func testRunNagle(t *testing.T) {
	e := newLab(t)
	client, server, addr := e.ClientNS.Name, e.ServerNS.Name, e.ServerIP+":7500"
	startServe(t, server, "ND_SERVER=nagle", "ND_ADDR="+addr)
	r, text := runRemote(t, client, "-c 4 -t 1 -d 3s --baseline 1s --tail 1s --server-netns "+server+" http://"+addr+"/")
	everyActiveHasWindowEvidence(t, r)
	f := findActive(r, "nagle-delayed-ack")
	if f == nil {
		t.Fatalf("no nagle-delayed-ack; findings %+v\n%s", r.Findings, text)
	}
	all := ""
	for _, e := range f.Evidence {
		all += e.Text + "\n"
	}
	for _, want := range []string{"35–60 ms band", "TcpExtDelayedACKs +"} {
		if !strings.Contains(all, want) {
			t.Errorf("evidence lacks %q:\n%s", want, all)
		}
	}
}

// TestRunSeveralFaults is seed 000 in one run: the server's conntrack
// table is full, its listener has a backlog of 8, and the client has 101
// local ports. All three must be reported together.
func TestRunSeveralFaults(t *testing.T) {
	e := newLab(t)
	client, server, addr := e.ClientNS.Name, e.ServerNS.Name, e.ServerIP+":7600"
	labMust(t, e.Sysctl(e.ClientNS, "net.ipv4.ip_local_port_range", "40000 40100"))
	startServe(t, server, "ND_SERVER=slow", "ND_ADDR="+addr)
	// nf_conntrack_max is global (read-only in a namespace); the host's
	// own table is empty here, and the lab restores the old value.
	labMust(t, e.TrackConnections(e.ServerNS, 60))
	r, text := runRemote(t, client, "-c 100 -t 1 -d 3s --baseline 1s --tail 1s --server-netns "+server+" http://"+addr+"/")
	everyActiveHasWindowEvidence(t, r)
	found := map[report.FindingID]report.Side{}
	for _, f := range r.Findings {
		if f.Status == "active" || f.ID == "ephemeral-port-exhaustion" {
			found[f.ID] = f.Side
		}
	}
	// The client's 101 ports show as latent (a small range) or, when the
	// run used them up, active: either names the fault.
	want := map[report.FindingID]report.Side{"conntrack-table-full": "server", "accept-queue-overflow": "server", "ephemeral-port-exhaustion": "client"}
	for id, side := range want {
		if found[id] != side {
			t.Errorf("%s on side %q, want %q; found %v\n%s", id, found[id], side, found, text)
		}
	}
}

// testRunScript: run -s loads with a wrk script through the same engine
// as load -s (a pipeline of three requests per write): every response is
// counted and 2xx, and the run is diagnosed and exits as usual.
func testRunScript(t *testing.T) {
	script, err := filepath.Abs("../load/testdata/scripts/pipeline.lua")
	if err != nil {
		t.Fatal(err)
	}
	code, r, text := runInNetns(t, "fast", "-c 4 -t 1 -d 2s --baseline 1s --tail 1s -s "+script)
	if r.Load == nil || r.Load.Requests < 30 || r.Load.Status["2xx"] != r.Load.Requests {
		t.Fatalf("exit %d, load %+v\n%s", code, r.Load, text)
	}
	// Exit 1 is for an active critical finding. Beside TestPaired's other
	// loads one may rightly be active: the host's run-queue contention,
	// the server's threads waiting for CPUs its neighbours held. (CI run
	// 38 exited 1 here with every answer 2xx, and the test did not say
	// which finding; now it does.)
	var critical []string
	for _, f := range r.Findings {
		if f.Status == report.Active && f.Severity == report.Critical && f.ID != rules.RunQueueContention {
			critical = append(critical, string(f.ID)+": "+f.Title)
		}
	}
	if code != ExitOK && (code != ExitFindings || len(critical) > 0) {
		t.Fatalf("exit %d, active critical findings %q\n%s", code, critical, text)
	}
}
