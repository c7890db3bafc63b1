package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// checkDeps runs check on the lab's server namespace while clients
// send what they are given (none: an idle host), and returns its report
// and text.
func checkDeps(t *testing.T, e *lab.Env, api string, clients int) (*report.Report, string) {
	t.Helper()
	if clients > 0 {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		sent := traffic{clients: clients, keepAlive: true, timeout: 5 * time.Second}.run(ctx, t, e, "http://"+api+"/")
		// The traffic is production's: already there, every client
		// answered at least once.
		poll.True(t, time.Minute, "the clients' first answers", func() bool { return sent.ok.Load() >= int64(clients) })
	}
	out := filepath.Join(t.TempDir(), "r.json")
	code, stdout, stderr := runCLI(t, "check", "--netns", e.ServerNS.Name, "--window", "3s", "--no-dns", "--json", out)
	if code != ExitOK && code != ExitFindings {
		t.Fatalf("check exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	r := readReport(t, out)
	if r.Dependencies == nil {
		t.Fatalf("check traced no dependencies:\n%s\n%s", stdout, stderr)
	}
	return r, stdout
}

// tracedDep is the report's dependency at addr.
func tracedDep(r *report.Report, addr string) *app.Dependency {
	for _, s := range r.Dependencies.Servers {
		for i := range s.Deps {
			if s.Deps[i].Addr == addr {
				return &s.Deps[i]
			}
		}
	}
	return nil
}

func depFindings(r *report.Report) []report.Finding {
	var out []report.Finding
	for _, f := range r.Findings {
		if f.ID == rules.DependencyPoolSaturated || f.ID == rules.DependencySlow {
			out = append(out, f)
		}
	}
	return out
}

// testCheckDependencyPool: under ordinary clients (32 at once, no
// netdoctor load), check finds the API's 4 connections to the backend
// that answers in 20 ms busy all the time: the pool is saturated, ~20 ms
// per round trip (within 25 % of the API's clock), at most ~200 req/s; in
// Go and python3.
func testCheckDependencyPool(t *testing.T) {
	for _, py := range []bool{false, true} {
		t.Run(map[bool]string{false: "go", true: "python"}[py], func(t *testing.T) {
			e := newLab(t)
			api, h := depStartAPI(t, e, e.ServerNS.Name, e.ServerIP+":7300", py, 20*time.Millisecond, 0)
			r, text := checkDeps(t, e, api, 32)
			backend := e.ServerIP + ":7300"
			d := tracedDep(r, backend)
			if d == nil {
				t.Fatalf("no dependency %s in\n%s", backend, text)
			}
			truth, near := apiNear(t, h, 20*time.Millisecond, d.RoundTrip)
			t.Logf("%s: %d conns, busy %.2f, %.0f round trips/s, %v per round trip (the API's clock: %v) over %.1fs", d.Addr, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, truth, d.Seconds)
			if d.Conns != 4 || !near || d.Owner == "" {
				t.Errorf("dependency %+v, want 4 connections, %v ± 25 %%, its owner", d, truth)
			}
			fs := depFindings(r)
			if len(fs) != 1 || fs[0].ID != rules.DependencyPoolSaturated {
				t.Fatalf("findings %+v, want %s alone\n%s", fs, rules.DependencyPoolSaturated, text)
			}
			if f := fs[0]; !strings.Contains(f.Title, backend) || !strings.Contains(f.Title, ": 4 connections") || !strings.Contains(f.Title, "req/s through this pool") {
				t.Errorf("title %q", f.Title)
			}
			if !strings.Contains(text, "Dependencies (") || !strings.Contains(text, backend) {
				t.Errorf("no dependency table in\n%s", text)
			}
		})
	}
}

// testCheckDependencyChain: under ordinary clients, an API's 8
// connections wait on a middle service whose own 2 connections to a
// 20 ms backend are all taken. check finds both pools saturated, names
// the middle service's as the cause of the API's (JSON and text), and
// does not advise the API a bigger pool: the middle service has no room.
func testCheckDependencyChain(t *testing.T) {
	e := newLab(t)
	backend, mid, api := e.ServerIP+":7300", e.ServerIP+":7400", e.ServerIP+":8080"
	startHelper(t, e.ServerNS.Name, "depbackend", "ND_ADDR="+backend, "ND_DELAY=20ms")
	startHelper(t, e.ServerNS.Name, "depapi", "ND_ADDR="+mid, "ND_BACKEND="+backend, "ND_POOL=2", "ND_SERVE=line")
	h := startHelper(t, e.ServerNS.Name, "depapi", "ND_ADDR="+api, "ND_BACKEND="+mid, "ND_POOL=8")
	r, text := checkDeps(t, e, api, 32)
	var toMid, toBackend *report.Finding
	for _, f := range depFindings(r) {
		switch {
		case strings.HasSuffix(f.Subject, " → "+mid):
			toMid = &f
		case strings.HasSuffix(f.Subject, " → "+backend):
			toBackend = &f
		}
	}
	if toMid == nil || toBackend == nil || toMid.ID != rules.DependencyPoolSaturated || toBackend.ID != rules.DependencyPoolSaturated {
		t.Fatalf("findings %+v, want both pools saturated\n%s", depFindings(r), text)
	}
	d := tracedDep(r, mid)
	if d == nil {
		t.Fatalf("no dependency %s in\n%s", mid, text)
	}
	truth, near := apiNear(t, h, 80*time.Millisecond, d.RoundTrip)
	t.Logf("%s: %d conns, busy %.2f, %.0f round trips/s, %v per round trip (the API's clock: %v), network RTT %v", d.Addr, d.Conns, d.Busy, d.RoundTripsPerSec, d.RoundTrip, truth, d.MinRTT)
	if d.Conns != 8 || !near {
		t.Errorf("the API's pool %+v, want 8 connections, ~80 ms per round trip (each request waits for 3 others at the middle): %v ± 25 %%", d, truth)
	}
	// The network's RTT on one host, not the answers' time (the smoothed
	// RTT holds it: each ACK rides on an answer).
	if d := tracedDep(r, backend); d == nil || d.MinRTT <= 0 || d.MinRTT > time.Millisecond || !strings.Contains(text, "network RTT") {
		t.Errorf("the middle service's pool %+v: want its network RTT under 1 ms", d)
	}
	if toMid.CausedBy != rules.DependencyPoolSaturated || toMid.CauseSubject != toBackend.Subject {
		t.Errorf("%s is caused by %q %q, want %q", toMid.Subject, toMid.CausedBy, toMid.CauseSubject, toBackend.Subject)
	}
	if !strings.Contains(text, "a consequence of #") {
		t.Errorf("the text does not name the cause:\n%s", text)
	}
	if len(toMid.Fix) == 0 || !strings.HasPrefix(toMid.Fix[0], "not a bigger pool: "+mid+" is itself at capacity") {
		t.Errorf("the API's fix %q", toMid.Fix)
	}
}

// TestCheckDependencyQuiet: an idle API (its pool open, no requests)
// and an API whose backend answers at once raise no dependency finding;
// the busy one's backend is still in the table.
func TestCheckDependencyQuiet(t *testing.T) {
	for _, c := range []struct {
		name    string
		clients int
	}{{"idle", 0}, {"fast backend", 32}} {
		t.Run(c.name, func(t *testing.T) {
			e := newLab(t)
			api := depStart(t, e, e.ServerNS.Name, e.ServerIP+":7300", false, 0, 0)
			r, text := checkDeps(t, e, api, c.clients)
			if fs := depFindings(r); len(fs) > 0 {
				t.Errorf("findings %+v\n%s", fs, text)
			}
			d := tracedDep(r, e.ServerIP+":7300")
			switch {
			case c.clients == 0 && d != nil:
				t.Errorf("an idle pool in the table: %+v", *d)
			case c.clients > 0 && d == nil:
				t.Errorf("the backend is not in the table:\n%s", text)
			case d != nil:
				t.Logf("%+v", *d)
			}
		})
	}
}

// testAgentDependency: the agent in the server namespace traces the
// API's pool under ordinary clients (no netdoctor load) in its bursts:
// /metrics has the pool's series, ~20 ms per round trip (within 25 % of
// the API's clock),
// lint-clean, and its diagnosis holds the saturated pool active.
func testAgentDependency(t *testing.T) {
	e := newLab(t)
	api, h := depStartAPI(t, e, e.ServerNS.Name, e.ServerIP+":7300", false, 20*time.Millisecond, 0)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	traffic{clients: 32, keepAlive: true, timeout: 5 * time.Second}.run(ctx, t, e, "http://"+api+"/")
	url, tokFile, _, err := e.StartAgent(ctx, "--interval", "250ms", "--recent", "2s", "--retain", "1m", "--dependency-every", "3s")
	labMust(t, err)
	tok, err := os.ReadFile(tokFile)
	labMust(t, err)
	ns, err := netns.Resolve(e.ClientNS.Name)
	labMust(t, err)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DialContext: ns.Dial}}
	backend := e.ServerIP + ":7300"
	want := `netdoctor_dependency_round_trip_seconds{app="cli.test",destination="` + backend + `",listener="` + api + `",owner="cli.test"} `
	var body string
	poll.WaitEvery(time.Minute, agentEvery, func() bool {
		req, _ := http.NewRequest(http.MethodGet, url+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, want) && strings.Contains(body, `netdoctor_finding_active{id="dependency-pool-saturated"`)
	})
	var rt float64
	for _, line := range strings.Split(body, "\n") {
		if v, ok := strings.CutPrefix(line, want); ok {
			rt, _ = strconv.ParseFloat(v, 64)
		}
	}
	got := time.Duration(rt * float64(time.Second))
	truth, near := apiNear(t, h, 20*time.Millisecond, got)
	t.Logf("round trip %v (the API's clock: %v)\n%s", got, truth, grepLines(body, "dependency"))
	if !near {
		t.Fatalf("round trip %v, want %v ± 25 %%:\n%s", got, truth, grepLines(body, "dependency"))
	}
	for _, w := range []string{
		`netdoctor_dependency_connections{app="cli.test",destination="` + backend + `",listener="` + api + `",owner="cli.test"} 4`,
		`netdoctor_finding_active{id="dependency-pool-saturated",severity="critical"`,
	} {
		if !strings.Contains(body, w) {
			t.Errorf("no %s in\n%s", w, grepLines(body, "dependency"))
		}
	}
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
