package report

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// TestHTMLSelfContained: the page carries its script and data inline,
// escapes what it shows, and fetches nothing.
func TestHTMLSelfContained(t *testing.T) {
	p := &Page{Command: "run", Target: "http://10.0.0.2/", Verdict: "UNHEALTHY: <x>", Bad: true,
		Findings: []Finding{{ID: "accept-queue-overflow", Severity: "critical", Status: "active", Title: "Accept queue overflow",
			Evidence: []Item{{Text: "TcpExt.ListenOverflows +481", Window: true}}, Fix: []string{"sysctl -w net.core.somaxconn=4096"}}},
		Charts: []Chart{{Title: "Requests", Series: []Series{{Name: "requests/s", Points: []float64{1, 2, 3}}}}}}
	var b bytes.Buffer
	if err := HTML(&b, p); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"UNHEALTHY: &lt;x&gt;", "accept-queue-overflow", `class="window"`, "TcpExt.ListenOverflows &#43;481",
		"fix: sysctl -w net.core.somaxconn=4096", `data-series="[{&#34;name&#34;:&#34;requests/s&#34;,&#34;points&#34;:[1,2,3]}]"`,
		"canvas.chart", `name="viewport"`} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	for _, bad := range []string{"<script src", "<link ", "@import", "https://"} {
		if strings.Contains(page, bad) {
			t.Errorf("page refers to something outside it: %q", bad)
		}
	}
}

// TestHTMLChain: a consequence links to its cause's finding on the page,
// a cause not on the page is named without a dead link, and each
// server's dependency table is there with the text report's columns.
func TestHTMLChain(t *testing.T) {
	p := &Page{Command: "run", Target: "http://10.0.0.2/",
		Findings: []Finding{
			{ID: "dependency-pool-saturated", Severity: "critical", Status: "active", Title: "pool"},
			{ID: "accept-queue-overflow", Severity: "critical", Status: "active", Title: "queue", CausedBy: "dependency-pool-saturated"},
			{ID: "accept-queue-overflow", Severity: "warning", Status: "active", Title: "queue 2", CausedBy: "worker-pool-exhausted"},
		},
		Waits: WaitTables([]*app.Server{{Kind: "api", Addr: "10.0.0.2:8080", Deps: []app.Dependency{
			{Addr: "10.0.0.3:7300", Owner: "backend (pid 7)", Observed: true, Conns: 4, Busy: 0.98, RoundTripsPerSec: 196, RoundTrip: 20300 * time.Microsecond}}}}),
	}
	var b bytes.Buffer
	if err := HTML(&b, p); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{`id="f-dependency-pool-saturated"`, `id="f-accept-queue-overflow"`, `<a href="#f-dependency-pool-saturated">dependency-pool-saturated</a>`,
		"a consequence of worker-pool-exhausted (above)", "<h3>api on 10.0.0.2:8080</h3>", "<th>per round trip</th>",
		"<td>10.0.0.3:7300</td><td>backend (pid 7) *</td><td>4</td>", "<td>98%</td><td>196</td><td>20.3ms</td>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Count(page, `id="f-accept-queue-overflow"`) != 1 {
		t.Errorf("an anchor twice")
	}
	if strings.Contains(page, `href="#f-worker-pool-exhausted"`) {
		t.Errorf("a link to a finding not on the page")
	}
}

// TestCheckPageWaits: check's page carries the dependency tables it
// traced under the host's own traffic, and says there was no load.
func TestCheckPageWaits(t *testing.T) {
	r := &Report{Command: "check", Dependencies: &evidence.Traced{Seconds: 5, IntervalMS: 100, Followed: 1, Servers: []*app.Server{{Kind: "api", Addr: "10.0.0.2:8080",
		Deps: []app.Dependency{{Addr: "10.0.0.3:5432", Owner: "postgres (pid 3)", Conns: 4, Busy: 0.97, RoundTripsPerSec: 190, RoundTrip: 21 * time.Millisecond}}}}}}
	var b bytes.Buffer
	if err := HTML(&b, CheckPage(r)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h3>api on 10.0.0.2:8080</h3>", "<td>10.0.0.3:5432</td><td>postgres (pid 3)</td><td>4</td>", "without a load"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestCheckPageProfile: check's page shows its profile of the servers
// (what their time went to, their hottest functions) without a flame
// graph, whose stacks a check's report does not keep.
func TestCheckPageProfile(t *testing.T) {
	r := &Report{Command: "check", Profile: &cpuprof.Summary{Hz: 49, Duration: 5 * time.Second, Samples: 490, Servers: []cpuprof.ServerSummary{{
		Server: "nginx 0.0.0.0:443", Samples: 240, CPU: 4900 * time.Millisecond,
		Activities: []cpuprof.Activity{{Kind: cpuprof.TLS, Share: 0.97, Funcs: []string{"[libcrypto.so.3]"}}},
		Top:        []cpuprof.Func{{Name: "[libcrypto.so.3]", Self: 0.9, Total: 0.97}},
	}}}}
	var b bytes.Buffer
	if err := HTML(&b, CheckPage(r)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<h2>On-CPU profile</h2>", "<h3>nginx 0.0.0.0:443: 240 samples", "97% TLS"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(b.String(), `id="flame"`) {
		t.Errorf("a flame graph without stacks")
	}
}

// TestRunPageHost: a run's page has the host section check's page has
// (the observed side's listeners, rates, collectors), and its errors on
// a chart of their own: on the requests' axis a few errors a second
// against thousands of requests would draw flat.
func TestRunPageHost(t *testing.T) {
	r := &Run{Report: &Report{Status: OutcomeUnhealthy, Summary: Summary{
		Listeners: []evidence.Listener{{Proto: "tcp", Addr: "127.0.0.1:8000", RecvQ: 6, SendQ: 5, PIDs: []int{42}, Process: "python3"}},
		Rates:     map[string]float64{"TcpPassiveOpens": 330}}},
		Load: &load.Result{Timeline: []load.Second{{Length: time.Second, Requests: 3000, Errors: load.Errors{Connect: 12}}, {Length: time.Second, Requests: 2900}}}}
	p := RunPage(r, time.Unix(0, 0), nil, Server)
	var rows []string
	for _, row := range p.HostRows {
		rows = append(rows, row[0]+": "+row[1])
	}
	host := strings.Join(rows, "\n")
	for _, want := range []string{"status: unhealthy", "listener 127.0.0.1:8000: tcp, accept queue 6 of 5, python3 (pid 42)", "TcpPassiveOpens: 330.0/s"} {
		if !strings.Contains(host, want) {
			t.Errorf("host section lacks %q:\n%s", want, host)
		}
	}
	if len(p.Charts) < 2 || p.Charts[0].Title != "Requests per second" || len(p.Charts[0].Series) != 1 || p.Charts[1].Series[0].Name != "errors/s" {
		t.Errorf("charts: %+v", p.Charts[:2])
	}
}
