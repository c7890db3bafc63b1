package report

import (
	_ "embed"
	"encoding/json"
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
}

// HTML writes a self-contained page: styles and the chart script are
// inline, nothing is fetched, and it reads on a phone.
func HTML(w io.Writer, p *Page) error {
	data := struct {
		*Page
		Script template.JS
	}{p, template.JS(chartJS)}
	return pageTmpl.Execute(w, data)
}
