package report

import (
	"bytes"
	"strings"
	"testing"
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
