package report

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Version is the JSON report format version (docs/report.md). Version 2
// is one vocabulary: the status is the verdict's word, a load's status
// classes are status_classes, a listener's backlog is backlog, counters
// are named as nstat names them, and the actions are listed at the top.
// Read still reads version 1.
const Version = 2

// Report is the outcome of `check` or `diagnose`: the JSON contract.
type Report struct {
	Version int    `json:"version"`
	Command string `json:"command"`
	Verdict string `json:"verdict"`
	// Status is the verdict as one word for scripts (Outcome); reports
	// written before it had none, and Read derives it from the verdict.
	Status   Outcome       `json:"status"`
	Host     evidence.Host `json:"host"`
	Window   WindowInfo    `json:"window"`
	Findings []Finding     `json:"findings"`
	// Collectors lists, per collector, the worst state seen and why, so a
	// partial report says what is missing.
	Collectors []evidence.Status `json:"collectors"`
	Partial    bool              `json:"partial"`
	// Actions are every finding's actions that do something (not the
	// notes), in the findings' order, one entry for the same step asked
	// by several: what a script applies, without walking the findings.
	Actions []ReportAction `json:"actions"`
	Summary Summary        `json:"summary"`
	// Dependencies are the listening servers' outbound connections as
	// check or the agent traced them; nil when not traced.
	Dependencies *evidence.Traced `json:"dependencies,omitempty"`
	// TimeSplit is where a run's requests spent their time, from the
	// servers' CPU accounting (run only).
	TimeSplit *TimeSplit `json:"latency_split,omitempty"`
	// Profile is the servers' on-CPU profile, summed up: during a run's
	// load, or check's window; ProfileError says why there is none.
	Profile      *cpuprof.Summary `json:"profile,omitempty"`
	ProfileError string           `json:"profile_error,omitempty"`
	// FixesAsText: read from a report written before fixes were data,
	// whose findings' actions are their fix lines as notes (Read). Not
	// part of the report.
	FixesAsText bool `json:"-"`
}

// ReportAction is an action of the report's findings, with the findings
// that ask for it ("id subject", as tune plan names them).
type ReportAction struct {
	Findings []string `json:"findings"`
	Action
}

// Collect lists the actions of fs that do something, each once with the
// findings that ask for it.
func Collect(fs []Finding) []ReportAction {
	out := []ReportAction{}
	at := map[string]int{}
	for _, f := range fs {
		k := strings.TrimSpace(string(f.ID) + " " + f.Subject)
		for _, a := range f.Actions {
			if a.Kind == ActionNote || a.Kind == "" {
				continue
			}
			same := strings.Join([]string{string(a.Kind), a.Command, a.Setting, a.Value, a.Scope, a.Config, a.File, a.App, a.Addr, strconv.Itoa(a.Backlog)}, "\x00")
			if i, ok := at[same]; ok {
				if !slices.Contains(out[i].Findings, k) {
					out[i].Findings = append(out[i].Findings, k)
				}
				continue
			}
			at[same] = len(out)
			out = append(out, ReportAction{Findings: []string{k}, Action: a})
		}
	}
	return out
}

// WindowInfo is the span the findings rest on.
type WindowInfo struct {
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Seconds   float64   `json:"seconds"`
	Snapshots int       `json:"snapshots"`
}

// Summary is the host picture printed after the findings.
type Summary struct {
	TCPStates map[string]int      `json:"tcp_states,omitempty"`
	Listeners []evidence.Listener `json:"listeners,omitempty"`
	Conntrack *evidence.Conntrack `json:"conntrack,omitempty"`
	Sysctls   map[string]string   `json:"sysctls,omitempty"`
	Resolver  *evidence.Resolver  `json:"resolver,omitempty"`
	// Rates are per-second rates of counters, named as nstat names them
	// ("TcpPassiveOpens").
	Rates   map[string]float64 `json:"rates,omitempty"`
	Sockets string             `json:"sockets_note,omitempty"`
}

// keyRates are the counters whose per-second rate the summary shows,
// named as nstat names them (evidence.Nstat), as the summary's rates are.
var keyRates = []string{"TcpActiveOpens", "TcpPassiveOpens", "TcpInSegs", "TcpOutSegs", "TcpRetransSegs",
	"TcpExtListenOverflows", "TcpExtListenDrops", "TcpExtTCPTimeWaitOverflow"}

// New builds a report from a bundle and the findings of the rules.
func New(command string, b *evidence.Bundle, findings []Finding) *Report {
	r := &Report{Version: Version, Command: command, Host: b.Host, Findings: findings}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	render(r.Findings)
	r.Actions = Collect(r.Findings)
	if n := len(b.Snapshots); n > 0 {
		first, last := &b.Snapshots[0], &b.Snapshots[n-1]
		r.Window = WindowInfo{Start: first.Time, End: last.Time, Seconds: last.Time.Sub(first.Time).Seconds(), Snapshots: n}
		r.Summary.Sysctls = last.Sysctls
		r.Summary.Conntrack = last.Conntrack
		r.Summary.Resolver = last.Resolver
		for i := range b.Snapshots {
			if p := b.Snapshots[i].Resolver; p != nil && len(p.Probes) > 0 {
				r.Summary.Resolver = p
			}
		}
		if last.Sockets != nil {
			r.Summary.TCPStates = last.Sockets.TCP
			r.Summary.Listeners = last.Sockets.Listeners
			r.Summary.Sockets = last.Sockets.Note
		}
		if w, ok := b.Window(); ok {
			r.Summary.Rates = map[string]float64{}
			for _, c := range keyRates {
				if _, ok := w.Counter(evidence.CounterKey(c)); ok {
					r.Summary.Rates[c] = w.Rate(evidence.CounterKey(c))
				}
			}
		}
	}
	r.Collectors = worstStatus(b)
	for _, st := range r.Collectors {
		if st.State != evidence.StateOK {
			r.Partial = true
		}
	}
	r.Verdict, r.Status = verdict(r.Findings, len(b.Snapshots))
	return r
}

// render writes each finding's fix from its actions: the one place the
// lines a person reads are made.
func render(fs []Finding) {
	for i := range fs {
		fs[i].Fix = FixOf(fs[i])
	}
}

// worstStatus keeps, per collector, its worst state over all snapshots.
func worstStatus(b *evidence.Bundle) []evidence.Status {
	rank := map[string]int{evidence.StateOK: 0, evidence.StatePartial: 1, evidence.StateUnavailable: 2, evidence.StateError: 3}
	var out []evidence.Status
	idx := map[string]int{}
	for _, s := range b.Snapshots {
		for _, st := range s.Status {
			i, ok := idx[st.Collector]
			if !ok {
				idx[st.Collector] = len(out)
				out = append(out, st)
				continue
			}
			if rank[st.State] > rank[out[i].State] {
				d := out[i].Duration
				out[i] = st
				out[i].Duration = max(d, st.Duration)
			} else {
				out[i].Duration = max(out[i].Duration, st.Duration)
			}
		}
	}
	return out
}

// verdict is the report's sentence and its outcome.
func verdict(fs []Finding, snapshots int) (string, Outcome) {
	if snapshots < 2 {
		return "INCOMPLETE: fewer than two snapshots, nothing could be measured over time", OutcomeIncomplete
	}
	var crit, warn, latent int
	for _, f := range fs {
		switch {
		case f.Status == Latent:
			latent++
		case f.Severity == Critical:
			crit++
		case f.Severity == Warning:
			warn++
		}
	}
	switch {
	case crit > 0:
		o := criticalOutcome(fs)
		return fmt.Sprintf("%s: %s", o.Word(), fs[0].Title), o
	case warn > 0:
		return fmt.Sprintf("DEGRADED: %s", fs[0].Title), OutcomeDegraded
	case latent > 0:
		return fmt.Sprintf("LATENT: OK now, %d latent risk(s) that will hurt at scale", latent), OutcomeLatent
	}
	return "HEALTHY: no problem found", OutcomeHealthy
}

// JSON writes the report as indented JSON.
func JSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Text writes the human report: verdict first, then each finding with its
// evidence and fix, then the host picture and the collectors' health.
func Text(w io.Writer, r *Report) error {
	p := NewPrinter(w)
	ns := "host namespace"
	if r.Host.NetNS != "" {
		ns = "netns " + r.Host.NetNS
	}
	p.F("netdoctor %s — %s (%s), kernel %s, %.1fs window\n\n", r.Command, r.Host.Hostname, ns, r.Host.Kernel, r.Window.Seconds)
	p.F("%s\n", r.Verdict)
	if r.TimeSplit != nil {
		p.F("Where the time went: %s\n", r.TimeSplit.Text())
	}
	if r.Partial {
		p.F("(partial evidence: some collectors failed, see the end)\n")
	}
	for i, f := range r.Findings {
		where := string(f.ID)
		if f.Side != "" {
			where += ", " + string(f.Side) + " side"
		}
		p.F("\n%d. [%s %s] %s  (%s)\n", i+1, strings.ToUpper(string(f.Severity)), f.Status, f.Title, where)
		if f.CausedBy != "" {
			if c := CauseIndex(r.Findings, i); c >= 0 {
				p.F("   a consequence of #%d: %s\n", c+1, causeName(r.Findings[c]))
			} else {
				p.F("   a consequence of %s (above)\n", f.CausedBy)
			}
		}
		if f.Explains != "" {
			p.F("   impact: %s\n", f.Explains)
		}
		for _, e := range f.Shown() {
			mark := " "
			if e.Window {
				mark = "*"
			}
			p.F("   %s %s\n", mark, e.Text)
		}
		for _, fx := range f.Fix {
			p.F("   fix: %s\n", fx)
		}
	}
	if len(r.Findings) > 0 {
		p.F("\n(* = observed during the window)\n")
	}
	summary(p, r)
	if p.err == nil && r.Dependencies != nil {
		writeTraced(p.w, r.Dependencies)
	}
	if p.err == nil && r.Command == "check" {
		// A run's text shows its profile beside the servers behind
		// its port (RunText).
		ProfileText(p.w, r.Profile, r.ProfileError)
	}
	return p.Err()
}

func summary(p *Printer, r *Report) {
	s := r.Summary
	p.F("\nTCP sockets: %s\n", states(s.TCPStates))
	if s.Sockets != "" {
		p.F("  (%s)\n", s.Sockets)
	}
	if len(s.Listeners) > 0 {
		p.F("\nListeners:\n")
		tw := tabwriter.NewWriter(p.w, 2, 4, 2, ' ', 0)
		fmt.Fprintf(tw, "  PROTO\tADDRESS\tACCEPT-QUEUE\tBACKLOG\tPROCESS\n")
		for _, l := range s.Listeners {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\n", l.Proto, l.Addr, l.RecvQ, l.SendQ, procName(l))
		}
		if err := tw.Flush(); err != nil && p.err == nil {
			p.err = err
		}
	}
	if c := s.Conntrack; c != nil {
		p.F("\nConntrack: %d of %d entries, %d buckets, drop %d, early_drop %d, insert_failed %d (totals)\n",
			c.Count, c.Max, c.Buckets, c.Stats["drop"], c.Stats["early_drop"], c.Stats["insert_failed"])
	}
	if len(s.Rates) > 0 {
		var parts []string
		for _, k := range keyRates {
			if v, ok := s.Rates[k]; ok {
				parts = append(parts, fmt.Sprintf("%s %.1f/s", k, v))
			}
		}
		p.F("\nRates over the window: %s\n", strings.Join(parts, ", "))
	}
	if res := s.Resolver; res != nil {
		p.F("\nResolver (%s): nameservers %v\n", res.ConfPath, res.Nameservers)
		for _, g := range probeGroups(res.Probes) {
			pr := g[0]
			if len(g) == 1 {
				out := pr.Rcode
				if pr.Err != "" {
					out = pr.Err
				}
				p.F("  %s %s %s: %s in %s\n", pr.Server, pr.Type, pr.Name, out, pr.Duration.Round(time.Millisecond))
				continue
			}
			p.F("  %s %s %s: %s\n", pr.Server, pr.Type, pr.Name, probeSummary(g))
		}
	}
	p.F("\nCollectors:")
	for _, st := range r.Collectors {
		p.F(" %s=%s", st.Collector, st.State)
	}
	p.F("\n")
	for _, st := range r.Collectors {
		if st.State != evidence.StateOK {
			p.F("  %s %s: %s\n", st.Collector, st.State, st.Error)
		}
	}
}

func procName(l evidence.Listener) string {
	if len(l.PIDs) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s (pid %d)", printable.String(l.Process), l.PIDs[0])
}

func states(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, st := range evidence.TCPStates {
		if st != "" && m[st] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", st, m[st]))
		}
	}
	return strings.Join(parts, ", ")
}

// probeGroups groups repeated queries (same server, type and name), in
// order.
func probeGroups(ps []evidence.DNSProbe) [][]evidence.DNSProbe {
	var out [][]evidence.DNSProbe
	at := map[[3]string]int{}
	for _, p := range ps {
		k := [3]string{p.Server, p.Type, p.Name}
		i, ok := at[k]
		if !ok {
			i = len(out)
			at[k] = i
			out = append(out, nil)
		}
		out[i] = append(out[i], p)
	}
	return out
}

// probeSummary is "12 of 20 answered (NXDOMAIN), 8 timeout; fastest 35µs,
// slowest 86µs".
func probeSummary(g []evidence.DNSProbe) string {
	answered, errs := 0, map[string]int{}
	rcodes := map[string]bool{}
	var lo, hi time.Duration
	for _, p := range g {
		if p.Err != "" {
			errs[p.Err]++
			continue
		}
		if answered == 0 || p.Duration < lo {
			lo = p.Duration
		}
		hi = max(hi, p.Duration)
		answered++
		rcodes[p.Rcode] = true
	}
	text := fmt.Sprintf("%d of %d answered", answered, len(g))
	if len(rcodes) > 0 {
		var rs []string
		for r := range rcodes {
			rs = append(rs, r)
		}
		slices.Sort(rs)
		text += " (" + strings.Join(rs, ", ") + ")"
	}
	var es []string
	for e := range errs {
		es = append(es, e)
	}
	slices.Sort(es)
	for _, e := range es {
		text += fmt.Sprintf(", %d %s", errs[e], e)
	}
	if answered > 0 {
		text += fmt.Sprintf("; fastest %s, slowest %s", lo.Round(time.Microsecond), hi.Round(time.Microsecond))
	}
	return text
}

// CauseIndex is the index of the finding fs[i] is a consequence of, or
// -1: a cause is listed before its symptoms, and the subject tells two
// findings with one ID apart (php-fpm's full pool, not nginx's).
func CauseIndex(fs []Finding, i int) int {
	f := fs[i]
	if f.CausedBy == "" {
		return -1
	}
	for c := i - 1; c >= 0; c-- {
		if fs[c].ID == f.CausedBy && (f.CauseSubject == "" || fs[c].Subject == f.CauseSubject) {
			return c
		}
	}
	return -1
}

// causeName is how a consequence names its cause: the ID, and the
// subject when there is one.
func causeName(f Finding) string {
	if f.Subject == "" {
		return string(f.ID)
	}
	return string(f.ID) + " (" + f.Subject + ")"
}
