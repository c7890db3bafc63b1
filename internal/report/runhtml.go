package report

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// RunPage turns a run's report into the HTML page's charts and tables.
// b is the observed side's load window (the server's, else the client's)
// whose counters and sockets are charted, side its name; start is when
// the load started.
func RunPage(r *Run, start time.Time, b *evidence.Bundle, side Side) *Page {
	tl := whole(r.Load.Timeline)
	p := &Page{Command: "run", Target: r.Load.URL, Verdict: r.Verdict,
		Host: r.Host.Hostname + " · kernel " + r.Host.Kernel, When: start.Format(time.RFC1123), Findings: r.Findings}
	for _, f := range r.Findings {
		p.Bad = p.Bad || f.Hurts()
	}
	col := func(f func(load.Second) float64) []float64 {
		out := make([]float64, len(tl))
		for i, s := range tl {
			out[i] = f(s)
		}
		return out
	}
	perSec := func(s load.Second, v uint64) float64 { return float64(v) / max(s.Length.Seconds(), 0.001) }
	// Errors have a chart of their own: on the requests' axis a few
	// dozen errors a second against thousands of requests draw flat.
	p.Charts = append(p.Charts,
		Chart{Title: "Requests per second", Series: []Series{
			{Name: "requests/s", Points: col(func(s load.Second) float64 { return perSec(s, s.Requests) })},
		}},
		Chart{Title: "Errors per second", Series: []Series{
			{Name: "errors/s", Points: col(func(s load.Second) float64 { return perSec(s, s.Errors.Total()) })},
			{Name: "non-2xx/3xx/s", Points: col(func(s load.Second) float64 { return perSec(s, s.Status[0]+s.Status[1]+s.Status[4]+s.Status[5]) })},
		}},
		Chart{Title: "Latency (ms)", Series: []Series{
			{Name: "p50", Points: col(func(s load.Second) float64 { return float64(s.P50) / 1e6 })},
			{Name: "p99", Points: col(func(s load.Second) float64 { return float64(s.P99) / 1e6 })},
		}})
	var counters []Series
	for _, c := range []string{"TcpExtListenOverflows", "TcpExtTCPReqQFullDrop", "conntrack.drop", "TcpRetransSegs", "TcpExtTCPTimeWaitOverflow", "TcpPassiveOpens"} {
		pts := CounterSeries(tl, b, c)
		for _, v := range pts {
			if v > 0 {
				counters = append(counters, Series{Name: c + "/s", Points: pts})
				break
			}
		}
	}
	if len(counters) > 0 {
		p.Charts = append(p.Charts, Chart{Title: "Kernel counters, " + string(side) + " side", Series: counters})
	}
	p.Charts = append(p.Charts, Chart{Title: "Sockets, " + string(side) + " side", Series: []Series{
		{Name: "ESTABLISHED", Points: StateSeries(tl, b, "ESTABLISHED")},
		{Name: "TIME_WAIT", Points: StateSeries(tl, b, "TIME_WAIT")},
		{Name: "load connections open", Points: col(func(s load.Second) float64 { return float64(s.OpenConns) })},
	}})
	p.Waits = WaitTables(r.Servers)
	if r.TimeSplit != nil {
		p.TimeSplit = r.TimeSplit.Text()
	}
	from, to := loadSpan(r.Load)
	for _, s := range r.Servers {
		if lines := CPULines(s, from, to); len(lines) > 0 {
			p.CPU = append(p.CPU, CPUBlock{Server: s.Role + " " + s.Kind + " on " + s.Addr, Lines: lines})
		}
	}
	profilePage(p, r.Profile, r.Flame)
	l := r.Load
	p.LoadRows = [][2]string{
		{"requests", fmt.Sprint(l.Requests)}, {"requests/s", fmt.Sprintf("%.1f", l.RPS)},
		{"latency p50 / p99 / max", Dur(l.Latency.P50) + " / " + Dur(l.Latency.P99) + " / " + Dur(l.Latency.Max)},
		{"errors connect / read / write / timeout", fmt.Sprintf("%d / %d / %d / %d", l.Errors.Connect, l.Errors.Read, l.Errors.Write, l.Errors.Timeout)},
		{"status classes", Statuses(l.Status)}, {"throughput over time", r.Shape.Text},
		{"load generator CPU per request", fmt.Sprintf("%.1f µs", float64(l.Self.CPUPerRequest)/1e3)},
	}
	// The observed side's host picture, as check's page has it.
	if r.Report != nil {
		p.HostRows = hostRows(r.Report)
	}
	return p
}

// RunHTML writes a run's HTML page (RunPage).
func RunHTML(w io.Writer, r *Run, start time.Time, b *evidence.Bundle, side Side) error {
	return HTML(w, RunPage(r, start, b, side))
}

// whole drops the load's last second when it is a short remainder (the
// run ended 0.02 s into it): a rate over a sliver of a second plots as a
// spike or a dip that nothing caused. A remainder of half a second or
// more is kept: its rates are rates.
func whole(tl []load.Second) []load.Second {
	if n := len(tl); n > 1 && tl[n-1].Length < 500*time.Millisecond {
		return tl[:n-1]
	}
	return tl
}

// CounterSeries is a counter's rate in each second of the load timeline,
// read from the bundle's snapshots ("conntrack.drop" for conntrack stats).
func CounterSeries(tl []load.Second, b *evidence.Bundle, name string) []float64 {
	out := make([]float64, len(tl))
	if b == nil || len(b.Snapshots) < 2 {
		return out
	}
	for i, s := range tl {
		out[i] = b.RateAt(name, s.Start.Add(s.Length/2))
	}
	return out
}

// StateSeries is the number of TCP sockets in a state at the end of each
// second of the load timeline.
func StateSeries(tl []load.Second, b *evidence.Bundle, state string) []float64 {
	out := make([]float64, len(tl))
	if b == nil {
		return out
	}
	for i, s := range tl {
		end := s.Start.Add(s.Length)
		for _, snap := range b.Snapshots {
			if snap.Sockets != nil && !snap.Time.Before(end) {
				out[i] = float64(snap.Sockets.TCP[state])
				break
			}
		}
	}
	return out
}

// profilePage adds the profile's summary, hottest functions and, when
// there is one (a run's), flame graph to the page.
func profilePage(p *Page, sum *cpuprof.Summary, flame *cpuprof.Node) {
	if sum == nil {
		return
	}
	if flame != nil {
		if b, err := json.Marshal(flame); err == nil {
			p.Flame = string(b)
		}
	}
	p.Profile = fmt.Sprintf("%d Hz on each CPU for %s, %d samples, %.0f%% idle; its cost: %.2f%% of a core while sampling, %s of CPU to name the addresses",
		sum.Hz, Dur(sum.Duration), sum.Samples, 100*sum.IdleShare, 100*sum.Cost.CoreShare, Dur(sum.Cost.Symbolize))
	for _, s := range sum.Servers {
		t := ProfileTop{Server: fmt.Sprintf("%s: %d samples (%s of CPU), %.0f%% in the kernel", s.Server, s.Samples, Dur(s.CPU), 100*s.KernelShare)}
		for _, a := range s.Activities {
			if a.Share >= 0.02 {
				t.Lines = append(t.Lines, fmt.Sprintf("%.0f%% %s (%s)", 100*a.Share, a.Kind.Describe(), strings.Join(a.Funcs, ", ")))
			}
		}
		for _, f := range s.Top {
			t.Rows = append(t.Rows, []string{fmt.Sprintf("%.1f%%", 100*f.Self), fmt.Sprintf("%.1f%%", 100*f.Total), f.Name, f.Meaning.Describe()})
		}
		p.ProfileTops = append(p.ProfileTops, t)
	}
}
