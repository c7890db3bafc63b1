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

var pageTmpl = template.Must(template.New("page").Parse(pageHTML))

// Series is one line of a chart: a value per second.
type Series struct {
	Name   string    `json:"name"`
	Points []float64 `json:"points"`
}

// Chart is one chart of the page.
type Chart struct {
	Title  string
	Series []Series
}

// JSON is the chart's data for the page's script.
func (c Chart) JSON() (string, error) {
	b, err := json.Marshal(c.Series)
	return string(b), err
}

// Page is everything the HTML report shows.
type Page struct {
	Command, Target, Host, When, Verdict string
	Bad                                  bool
	Findings                             []Finding
	Charts                               []Chart
	LoadRows                             [][2]string
	// HostRows are a check's or a diagnosis's host picture (CheckPage).
	HostRows [][2]string
	// Waits are the servers' dependency tables: what each waited on.
	Waits []WaitTable
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
	}{p, views(p.Findings), DepHeader, template.JS(chartJS)}
	return pageTmpl.Execute(w, data)
}
