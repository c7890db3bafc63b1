package report

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// CapacityPage turns a capacity report into the HTML page: the verdict,
// what limited the capacity (its findings), the rate-vs-latency and
// rate-vs-goodput curves, the figures, the steps and the headroom.
func CapacityPage(c *Capacity) *Page {
	p := &Page{Command: "capacity", Target: c.URL, Verdict: c.Verdict, ChartsTitle: "Against the offered rate", RowsTitle: "Capacity"}
	if len(c.Steps) > 0 {
		p.When = c.Steps[0].Start.Format(time.RFC1123)
	}
	if d := c.Diagnosis; d != nil {
		p.Host = d.Host.Hostname + " · kernel " + d.Host.Kernel
	}
	for _, l := range c.LimitedBy {
		p.Findings = append(p.Findings, l.Finding)
	}
	p.Bad = c.CapacityRPS == 0
	// The curves: every open-loop step, by rate (a rate run twice is
	// two dots).
	var steps []Step
	for _, s := range c.Steps {
		if s.Rate > 0 {
			steps = append(steps, s)
		}
	}
	slices.SortStableFunc(steps, func(a, b Step) int {
		switch {
		case a.Rate < b.Rate:
			return -1
		case a.Rate > b.Rate:
			return 1
		}
		return 0
	})
	if len(steps) > 0 {
		xs := make([]float64, len(steps))
		for i, s := range steps {
			xs[i] = s.Rate
		}
		var lat []Series
		for _, q := range stepPercentiles(c) {
			if q == 100 {
				continue
			}
			pts := make([]float64, len(steps))
			for i, s := range steps {
				v, _ := s.At(q)
				pts[i] = float64(v) / 1e6
			}
			lat = append(lat, Series{Name: Objective{Percentile: q}.Name() + " (ms)", Points: pts})
		}
		for _, o := range c.SLO.Objectives {
			pts := make([]float64, len(steps))
			for i := range pts {
				pts[i] = float64(o.Bound) / 1e6
			}
			lat = append(lat, Series{Name: "SLO " + o.String(), Points: pts})
		}
		good := make([]float64, len(steps))
		offered := make([]float64, len(steps))
		for i, s := range steps {
			good[i], offered[i] = s.Goodput, s.Rate
		}
		p.Charts = []Chart{
			{Title: "Latency of every request (ms) against the offered rate (req/s)", Series: lat, X: xs, XUnit: "/s"},
			{Title: "Goodput against the offered rate (req/s)", Series: []Series{{Name: "goodput (2xx/3xx per s)", Points: good}, {Name: "offered", Points: offered}}, X: xs, XUnit: "/s"},
		}
	}
	p.LoadRows = [][2]string{
		{"capacity", capText(c) + " req/s"},
		{"SLO", c.SLO.Text},
		{"bracket (met – broke)", bracketText(c)},
	}
	if n := c.Noise; n != nil {
		p.LoadRows = append(p.LoadRows, [2]string{"run to run", fmt.Sprintf("at %s req/s: %s %s, goodput %s (spread %.0f %%)", rate(n.Rate), n.Objective, durs(n.Latency), rates(n.Goodput), 100*n.Spread)})
	}
	p.LoadRows = append(p.LoadRows, [2]string{"search", fmt.Sprintf("%d steps in %s of %s: %s", len(c.Steps), shortDur(c.Elapsed.Round(time.Second)), shortDur(c.MaxDuration), c.Stopped)})
	if d := c.Diagnosis; d != nil {
		p.LoadRows = append(p.LoadRows, [2]string{"diagnosis of the step", d.Verdict})
	}
	for _, n := range c.Notes {
		p.LoadRows = append(p.LoadRows, [2]string{"note", n})
	}
	st := Table{Title: "Steps", Note: "open loop: latency of every request from its intended send time, failed ones at the time they failed or timed out", Header: StepColumns(c)}
	for _, s := range c.Steps {
		st.Rows = append(st.Rows, StepRow(c, s))
	}
	p.Tables = append(p.Tables, st)
	if len(c.Headroom) > 0 {
		ht := Table{Title: "Headroom", Note: "how far each resource was from its limit in the diagnosed step, fullest first", Header: []string{"resource", "subject", "use of its limit", "what"}}
		for _, h := range c.Headroom {
			ht.Rows = append(ht.Rows, []string{h.Resource, h.Subject, Percent(h.Share), h.Text})
		}
		p.Tables = append(p.Tables, ht)
	}
	return p
}

// CapacityHTML writes a capacity report's page (CapacityPage).
func CapacityHTML(w io.Writer, c *Capacity) error { return HTML(w, CapacityPage(c)) }
