package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// Load is the JSON of `load --json`: the result's fields at the top
// level, plus the findings about the load generator itself and their
// actions. It has no verdict, so no "status": the responses' status
// classes are status_classes.
type Load struct {
	Version  int            `json:"version"`
	Command  string         `json:"command"`
	Findings []Finding      `json:"findings"`
	Actions  []ReportAction `json:"actions"`
	*load.Result
}

// LoadGeneratorSaturated is the finding of a load limited by the load
// generator itself. It is declared here, with the load's report, because
// the load's own text names it; internal/rules makes it.
const LoadGeneratorSaturated FindingID = "load-generator-saturated"

// NewLoad is the report of a load.
func NewLoad(res *load.Result, findings []Finding) *Load {
	if findings == nil {
		findings = []Finding{}
	}
	render(findings)
	return &Load{Version: Version, Command: "load", Findings: findings, Actions: Collect(findings), Result: res}
}

// LoadText writes a load result as the load section of run's report:
// wrk's figures in a compact form, plus status classes and the
// generator's own cost. `netdoctor load` prints wrk's exact layout
// instead (WrkText); run's section stays this one, since a run read back
// from its bundle has no Req/Sec samples to fill wrk's table with.
func LoadText(w io.Writer, r *load.Result, latency bool) error {
	p := NewPrinter(w)
	mode := "keep-alive"
	if !r.KeepAlive {
		mode = "a new connection per request"
	}
	p.F("  %d threads and %d connections (%s)", r.Threads, r.Connections, mode)
	if r.Rate > 0 {
		p.F(", %.0f req/s open-loop", r.Rate)
	}
	p.F("\n")
	l := r.Latency
	p.F("  Latency   avg %s  stdev %s  max %s\n", Dur(l.Mean), Dur(l.Stdev), Dur(l.Max))
	if latency {
		p.F("  Latency Distribution\n")
		for _, pc := range r.Percentiles {
			p.F("  %7s%%  %s\n", trimFloat(pc.Percentile), Dur(pc.Latency))
		}
	}
	p.F("  %d requests in %.2fs, %s read\n", r.Requests, r.Elapsed.Seconds(), size(float64(r.Bytes)))
	if e := r.Errors; e.Total() > 0 {
		p.F("  Socket errors: connect %d, read %d, write %d, timeout %d\n", e.Connect, e.Read, e.Write, e.Timeout)
		p.F("  Error causes: %s\n", causes(r.ErrorCauses))
	}
	if line := EveryRequest(r); line != "" {
		p.F("  %s\n", line)
	}
	p.F("  Status: %s\n", Statuses(r.Status))
	if n := r.Requests - r.Status["2xx"] - r.Status["3xx"]; n > 0 {
		p.F("  Non-2xx or 3xx responses: %d\n", n)
	}
	p.F("Requests/sec: %10.2f\n", r.RPS)
	p.F("Transfer/sec: %10s\n", size(r.BytesPerSec))
	busy := make([]string, len(r.Self.ThreadBusy))
	for i, b := range r.Self.ThreadBusy {
		busy[i] = fmt.Sprintf("%.0f%%", 100*b)
	}
	p.F("Load generator: %s%.1f µs CPU per request, threads busy %s, %d connections opened\n",
		engineOf(r), float64(r.Self.CPUPerRequest)/1e3, strings.Join(busy, " "), r.ConnectionsOpened)
	caveats(p, r)
	return p.Err()
}

// engineOf names the engine that ran, for the generator's line; nothing
// for results written before the engine was recorded.
func engineOf(r *load.Result) string {
	if r.Engine == "" {
		return ""
	}
	return string(r.Engine) + " engine, "
}

// caveats are what qualifies a load's numbers, in both text layouts:
// its notes, a saturated generator, an interrupted run.
func caveats(p *Printer, r *load.Result) {
	for _, n := range r.Notes {
		p.F("Note: %s\n", n)
	}
	if r.Saturated {
		p.F("WARNING: the load generator may be the bottleneck (%s):\n", LoadGeneratorSaturated)
		for _, s := range r.SaturatedBy {
			p.F("  - %s\n", s)
		}
	}
	if r.Interrupted {
		p.F("Interrupted: the numbers cover the run until Ctrl-C.\n")
	}
}

// Dur formats a latency as wrk does: "1.23ms", "2.00s", "850.00us".
func Dur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fus", float64(d)/1e3)
}

func size(b float64) string {
	for _, u := range []string{"B", "KB", "MB", "GB"} {
		if b < 1024 || u == "GB" {
			return fmt.Sprintf("%.2f%s", b, u)
		}
		b /= 1024
	}
	return ""
}

func trimFloat(f float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", f), "0"), ".")
}

// Statuses lists response counts by class: "2xx 100, 5xx 3".
func Statuses(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func causes(m map[string]uint64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
