package report

import (
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/netdoctor/netdoctor/internal/load"
)

// The text of `netdoctor load` is wrk's, byte for byte where the numbers
// allow, so that scripts written for wrk 4 (src/wrk.c, src/units.c) read
// it unchanged: WrkHeader prints the two lines wrk prints as it starts,
// WrkText the rest. netdoctor's own lines come after wrk's last one,
// "Transfer/sec:", and use none of the words wrk's lines are found by
// (Latency, Req/Sec, requests in, Socket errors, NN%).

// WrkHeader writes wrk's opening lines: "Running 10s test @ URL" and
// "  2 threads and 10 connections". test is the run's length as
// WrkDuration writes it (or "300-request" for a run bounded by -n).
func WrkHeader(w io.Writer, test, url string, threads, connections int) error {
	_, err := fmt.Fprintf(w, "Running %s test @ %s\n  %d threads and %d connections\n", test, url, threads, connections)
	return err
}

// WrkDuration writes a test duration as wrk does ("10s", "2m", "1h") when
// wrk's whole-unit form is exact, and as Go does otherwise ("1m30s",
// "500ms"), where wrk would round 90 s to "2m".
func WrkDuration(d time.Duration) string {
	if d > 0 && d%time.Second == 0 {
		s := int64(d / time.Second)
		switch {
		case s < 51: // wrk moves to the next unit at 0.85 of it
			return fmt.Sprintf("%ds", s)
		case s%60 == 0 && s/60 < 51:
			return fmt.Sprintf("%dm", s/60)
		case s%3600 == 0:
			return fmt.Sprintf("%dh", s/3600)
		}
	}
	return d.String()
}

// WrkText writes a load result as wrk prints it after its run, then
// netdoctor's own lines: the finer percentiles, the status classes,
// the errors by cause, the load generator's cost and warnings.
func WrkText(w io.Writer, r *load.Result, latency bool) error {
	p := NewPrinter(w)
	p.F("  Thread Stats%6s%11s%8s%12s\n", "Avg", "Stdev", "Max", "+/- Stdev")
	wrkStats(p, "Latency", r.LatencySpread, wrkTimeUs)
	if len(r.Workers) == 0 { // a merge has no thread's 100 ms samples
		wrkStats(p, "Req/Sec", r.ReqPerSec, wrkMetric)
	}
	if latency {
		p.F("  Latency Distribution\n")
		for _, pc := range []float64{50, 75, 90, 99} {
			p.F("%7.0f%%%s\n", pc, wrkColumn(wrkTimeUs(float64(percentile(r, pc)/time.Microsecond)), 10))
		}
	}
	p.F("  %d requests in %s, %sB read\n", r.Requests, wrkTimeUs(float64(r.Elapsed/time.Microsecond)), wrkBinary(float64(r.Bytes)))
	if e := r.Errors; e.Total() > 0 {
		p.F("  Socket errors: connect %d, read %d, write %d, timeout %d\n", e.Connect, e.Read, e.Write, e.Timeout)
	}
	if n := r.Requests - r.Status["2xx"] - r.Status["3xx"]; n > 0 {
		p.F("  Non-2xx or 3xx responses: %d\n", n)
	}
	p.F("Requests/sec: %9.2f\n", r.RPS)
	p.F("Transfer/sec: %10sB\n", wrkBinary(r.BytesPerSec))

	// netdoctor's lines.
	pcs := make([]string, 0, len(r.Percentiles))
	for _, pc := range r.Percentiles {
		name := "p" + trimFloat(pc.Percentile)
		if pc.Percentile == 100 {
			name = "max"
		}
		pcs = append(pcs, name+" "+Dur(pc.Latency))
	}
	if len(pcs) > 0 && r.Requests > 0 {
		p.F("Percentiles: %s\n", strings.Join(pcs, ", "))
	}
	if line := EveryRequest(r); line != "" {
		p.F("%s\n", line)
	}
	p.F("Status: %s\n", Statuses(r.Status))
	if r.Errors.Total() > 0 {
		p.F("Errors by cause: %s\n", causes(r.ErrorCauses))
	}
	mode := "keep-alive"
	if !r.KeepAlive {
		mode = "a new one per request"
	}
	p.F("Connections: %s, %d opened", mode, r.ConnectionsOpened)
	if r.Rate > 0 {
		p.F("; open loop at %.0f req/s", r.Rate)
	}
	p.F("\n")
	// Shares, not percentages: a script grepping wrk's "99%" line must
	// not find a thread 99% busy.
	busy := make([]string, len(r.Self.ThreadBusy))
	for i, b := range r.Self.ThreadBusy {
		busy[i] = fmt.Sprintf("%.2f", b)
	}
	p.F("Load generator: %s%.1f µs CPU per request; share of the run each thread was on CPU: %s\n", engineOf(r), float64(r.Self.CPUPerRequest)/1e3, strings.Join(busy, " "))
	caveats(p, r)
	return p.Err()
}

// percentile is the latency at pc from the result's distribution.
func percentile(r *load.Result, pc float64) time.Duration {
	for _, p := range r.Percentiles {
		if p.Percentile == pc {
			return p.Latency
		}
	}
	return 0
}

// wrkStats writes one row of the Thread Stats table (wrk's print_stats).
func wrkStats(p *Printer, name string, s load.Spread, format func(float64) string) {
	p.F("    %-10s%s%s%s%8.2f%%\n", name, wrkColumn(format(s.Mean), 8), wrkColumn(format(s.Stdev), 10),
		wrkColumn(format(s.Max), 9), s.WithinStdev)
}

// wrkColumn right-aligns a number with its unit as wrk's print_units
// does: the unit's letters hang into the two columns after the digits.
func wrkColumn(msg string, width int) string {
	pad := 2
	if n := len(msg); n > 0 && unicode.IsLetter(rune(msg[n-1])) {
		pad--
		if n > 1 && unicode.IsLetter(rune(msg[n-2])) {
			pad--
		}
	}
	width -= pad
	if len(msg) > width {
		msg = msg[:width] // wrk's "%*.*s" cuts too
	}
	return fmt.Sprintf("%*s%s", width, msg, "  "[:pad])
}

// wrkUnits is wrk's format_units: the value is divided by scale, and
// the unit moves on, while it is at least 0.85 of scale and a next unit
// remains. As in wrk the last unit listed is never reached: its table
// ends there.
func wrkUnits(n, scale float64, base string, units []string, prec int) string {
	unit := base
	for i := 0; i+1 < len(units) && n >= scale*0.85; i++ {
		n /= scale
		unit = units[i]
	}
	return fmt.Sprintf("%.*f%s", prec, n, unit)
}

// wrkTimeUs formats microseconds as wrk's format_time_us: "81.00us",
// "1.16ms", "2.10s", "1.50m".
func wrkTimeUs(us float64) string {
	if us >= 1e6 {
		return wrkUnits(us/1e6, 60, "s", []string{"m", "h"}, 2)
	}
	return wrkUnits(us, 1000, "us", []string{"ms", "s"}, 2)
}

// wrkMetric is wrk's format_metric: "849.00", "48.79k", "1.20M".
func wrkMetric(n float64) string {
	return wrkUnits(n, 1000, "", []string{"k", "M", "G", "T", "P"}, 2)
}

// wrkBinary is wrk's format_binary, to which wrk appends "B": "25.07M".
func wrkBinary(n float64) string {
	return wrkUnits(n, 1024, "", []string{"K", "M", "G", "T", "P"}, 2)
}
