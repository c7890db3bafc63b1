package cli

import (
	"fmt"
	"io"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
)

// runPage turns a run into the HTML report's charts and tables.
func runPage(r *run.Report, res *run.Result) *report.Page {
	tl := res.Load.Timeline
	p := &report.Page{Command: "run", Target: res.Load.URL, Verdict: r.Verdict,
		Host: r.Host.Hostname + " · kernel " + r.Host.Kernel, When: res.LoadStart.Format(time.RFC1123), Findings: r.Findings}
	for _, f := range r.Findings {
		p.Bad = p.Bad || (f.Status == report.Active && f.Severity == report.Critical)
	}
	col := func(f func(load.Second) float64) []float64 {
		out := make([]float64, len(tl))
		for i, s := range tl {
			out[i] = f(s)
		}
		return out
	}
	perSec := func(s load.Second, v uint64) float64 { return float64(v) / max(s.Length.Seconds(), 0.001) }
	p.Charts = append(p.Charts,
		report.Chart{Title: "Requests and errors per second", Series: []report.Series{
			{Name: "requests/s", Points: col(func(s load.Second) float64 { return perSec(s, s.Requests) })},
			{Name: "errors/s", Points: col(func(s load.Second) float64 { return perSec(s, s.Errors.Total()) })},
			{Name: "non-2xx/3xx/s", Points: col(func(s load.Second) float64 { return perSec(s, s.Status[0]+s.Status[1]+s.Status[4]+s.Status[5]) })},
		}},
		report.Chart{Title: "Latency (ms)", Series: []report.Series{
			{Name: "p50", Points: col(func(s load.Second) float64 { return float64(s.P50) / 1e6 })},
			{Name: "p99", Points: col(func(s load.Second) float64 { return float64(s.P99) / 1e6 })},
		}})
	var b *evidence.Bundle
	name := "server"
	for _, s := range res.Sides {
		if s.Observed {
			b, name = run.Window(s.Bundle, res.LoadStart), string(s.Name)
			break
		}
	}
	var counters []report.Series
	for _, c := range []string{"TcpExt.ListenOverflows", "TcpExt.TCPReqQFullDrop", "conntrack.drop", "Tcp.RetransSegs", "TcpExt.TCPTimeWaitOverflow", "Tcp.PassiveOpens"} {
		pts := run.CounterSeries(tl, b, c)
		for _, v := range pts {
			if v > 0 {
				counters = append(counters, report.Series{Name: c + "/s", Points: pts})
				break
			}
		}
	}
	if len(counters) > 0 {
		p.Charts = append(p.Charts, report.Chart{Title: "Kernel counters, " + name + " side", Series: counters})
	}
	p.Charts = append(p.Charts, report.Chart{Title: "Sockets, " + name + " side", Series: []report.Series{
		{Name: "ESTABLISHED", Points: run.StateSeries(tl, b, "ESTABLISHED")},
		{Name: "TIME_WAIT", Points: run.StateSeries(tl, b, "TIME_WAIT")},
		{Name: "load connections open", Points: col(func(s load.Second) float64 { return float64(s.OpenConns) })},
	}})
	l := res.Load
	p.LoadRows = [][2]string{
		{"requests", fmt.Sprint(l.Requests)}, {"requests/s", fmt.Sprintf("%.1f", l.RPS)},
		{"latency p50 / p99 / max", dur(l.Latency.P50) + " / " + dur(l.Latency.P99) + " / " + dur(l.Latency.Max)},
		{"errors connect / read / write / timeout", fmt.Sprintf("%d / %d / %d / %d", l.Errors.Connect, l.Errors.Read, l.Errors.Write, l.Errors.Timeout)},
		{"status", statuses(l.Status)}, {"throughput over time", res.Shape.Text},
		{"load generator CPU per request", fmt.Sprintf("%.1f µs", float64(l.Self.CPUPerRequest)/1e3)},
	}
	return p
}

func writeRunHTML(path string, stdout io.Writer, r *run.Report, res *run.Result) error {
	return writeOut(path, stdout, "HTML report", func(w io.Writer) error { return report.HTML(w, runPage(r, res)) })
}
