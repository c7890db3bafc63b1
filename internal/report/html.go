package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
)

//go:embed assets/page.html
var pageHTML string

//go:embed assets/chart.js
var chartJS string

// The flame graph's renderer: d3-flame-graph and the d3 modules it
// needs, vendored from npm by scripts/vendor-flamegraph.sh (licences in
// assets/flamegraph/LICENSES). Inlined only in a page that has a
// profile.
var (
	//go:embed assets/flamegraph/d3.min.js
	d3JS string
	//go:embed assets/flamegraph/d3-flamegraph.min.js
	flamegraphJS string
	//go:embed assets/flamegraph.js
	flameJS string
)

// xyChartJS draws the charts against a rate (Chart.X), inlined only in
// pages that have one.
//
//go:embed assets/xychart.js
var xyChartJS string

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// Series is one line of a chart: a value per second.
type Series struct {
	Name   string    `json:"name"`
	Points []float64 `json:"points"`
}

// Chart is one chart of the page. Its points are a second apart, or,
// when X is set, at X's values (in XUnit): capacity's rate-vs-latency
// curve.
type Chart struct {
	Title  string
	Series []Series
	X      []float64
	XUnit  string
}

// JSON is the chart's data for the page's script.
func (c Chart) JSON() (string, error) {
	b, err := json.Marshal(c.Series)
	return string(b), err
}

// XJSON is the chart's X values for the page's script.
func (c Chart) XJSON() (string, error) {
	b, err := json.Marshal(c.X)
	return string(b), err
}

// Table is a table of the page: a header and rows of cells.
type Table struct {
	Title, Note string
	Header      []string
	Rows        [][]string
}

// Page is everything the HTML report shows.
type Page struct {
	Command, Target, Host, When, Verdict string
	Bad                                  bool
	Findings                             []Finding
	Charts                               []Chart
	// ChartsTitle heads the charts: "Per second" when empty.
	ChartsTitle string
	LoadRows    [][2]string
	// RowsTitle heads LoadRows: "Load" when empty.
	RowsTitle string
	// HostRows are a check's or a diagnosis's host picture (CheckPage).
	HostRows [][2]string
	// Waits are the servers' dependency tables: what each waited on.
	Waits []WaitTable
	// TimeSplit is where the requests' time went, in a line.
	TimeSplit string
	// CPU are the servers' CPU accounting lines, per server.
	CPU []CPUBlock
	// Profile is the on-CPU profile's summary line, its per-server
	// hottest functions, and Flame its tree as JSON (d3-flame-graph's
	// input); empty without a profile.
	Profile     string
	ProfileTops []ProfileTop
	Flame       string
	// Tables are tables of their own, after the charts (capacity's
	// steps and headroom).
	Tables []Table
}

// CPUBlock is one server's CPU accounting, as lines.
type CPUBlock struct {
	Server string
	Lines  []string
}

// ProfileTop is one server's hottest functions in the profile.
type ProfileTop struct {
	Server string
	Lines  []string
	Rows   [][]string // self, total, function, meaning
}

// WaitTable is one server's dependency table (the text report's "waits
// on"): DepHeader's columns, a row per destination.
type WaitTable struct {
	Server string
	Rows   [][]string
}

// findingView is a finding as the page shows it: Anchor is its id, for
// links from elsewhere ("f-<ID>" for the first with that ID, "f-<n>" for
// the others), and CauseAnchor the link to its cause when the cause is
// on the page.
type findingView struct {
	Finding
	Anchor      string
	CauseAnchor string
	CauseName   string
}

// views gives each finding its anchor, and each consequence its link.
func views(fs []Finding) []findingView {
	first := map[FindingID]bool{}
	out := make([]findingView, len(fs))
	for i, f := range fs {
		out[i].Finding = f
		out[i].Anchor = fmt.Sprintf("f-%d", i+1)
		if !first[f.ID] {
			first[f.ID] = true
			out[i].Anchor = "f-" + string(f.ID)
		}
	}
	for i := range out {
		if c := CauseIndex(fs, i); c >= 0 {
			out[i].CauseAnchor, out[i].CauseName = out[c].Anchor, causeName(fs[c])
		}
	}
	return out
}

// HTML writes a self-contained page: styles and the chart script are
// inline, nothing is fetched, and it reads on a phone.
func HTML(w io.Writer, p *Page) error {
	data := struct {
		*Page
		Findings  []findingView
		DepHeader []string
		Script    template.JS
		FlameLib  template.JS
		FlameData template.JS
		XYScript  template.JS
	}{Page: p, Findings: views(p.Findings), DepHeader: DepHeader, Script: template.JS(chartJS)}
	if p.Flame != "" {
		data.FlameLib = template.JS(d3JS + "\n" + flamegraphJS + "\n" + flameJS)
		data.FlameData = template.JS(p.Flame)
	}
	for _, c := range p.Charts {
		if c.X != nil {
			data.XYScript = template.JS(xyChartJS)
		}
	}
	return pageTmpl.Execute(w, data)
}
