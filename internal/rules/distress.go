package rules

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// UnexplainedDistress: the load shows distress that no other finding
// explains.
const UnexplainedDistress = report.UnexplainedDistress

var _ = define(Class{ID: UnexplainedDistress,
	Residual:   true,
	Critical:   true,
	Meaning:    "the load shows distress that no other finding explains: netdoctor does not call it healthy",
	Active:     "errors or timeouts (≥ 10, or ≥ 0.1 %), ≥ 1 % 5xx, a slow tail (p99 ≥ 1 s, or ≥ 100 ms and ≥ 10 × p50), a whole second without a response, a saw-tooth or a step down to under half that no counter moved with, or ≥ 5 connections left in CLOSE_WAIT on the server's port, with no active finding that explains that symptom (critical)",
	LatentWhen: "—",
	Seed:       "any fault no rule covers",
	ReportedBy: "`run`",
	Doc: `Rule ´distress´ (´distress.go´), the last to run. A run's load shows distress when requests failed
(errors or timeouts: at least 10, or 0.1 % of those tried), when 1 % or more of the responses were
5xx, when the tail is slow (p99 ≥ 1 s, or p99 ≥ 100 ms and ≥ 10 × the p50), when a whole second
passed without a response while connections were open, when throughput saw-toothed or stepped down
to under half and no counter moved with it, or when 5 or more connections were left in CLOSE_WAIT on
the server's port at the end (the server had not closed connections its clients closed). Each
symptom has the findings that explain it when active (failed requests: the queue, table, port,
descriptor, pool and loss findings, and every cause of latency for timeouts; a slow tail: the
causes of latency; CLOSE_WAIT: a slow application, a full pool, slow lookups, descriptors, CPU).
**Active, critical** when a symptom has none: netdoctor never says HEALTHY while the load shows
distress. The evidence is each unexplained symptom with its numbers, what the other rules looked at
and found nothing active in, what the server's busy workers were doing, and what the servers wrote
in their logs during the run that netdoctor has no class for: every log a server's processes hold
open for appending (found from their descriptors, whatever the server; a process not running as root
only where it owns the file) and the error logs their configurations name, each log's lines grouped
by shape (numbers, times, addresses and quoted text masked), its three most frequent with their counts
and a line each, for the reader to judge; the fix lists the next measurements (the timeline, off-CPU
profiles, slow calls with strace, a capture of the slow requests). Tested (TestLight/RunServerLogWords) with
a Go and a Python service holding every tenth request on an upstream named only in their own logs.`,
})

var _ = register(Rule{Name: "distress", Order: 240, Scope: Symptom, IDs: []report.FindingID{UnexplainedDistress}, Checks: "distress no rule explains", Check: checkDistress})

// symptom is one way the load shows distress, and what can explain it.
type symptom struct {
	text string
	// by says which findings explain it when active, from their class.
	by func(Class) bool
}

// What explains each kind of distress: failed requests are explained by
// what fails or delays them (a request that waits long enough times
// out), 5xx by what fails them, a slow tail by what delays them,
// connections left in CLOSE_WAIT by what holds the server's workers.
var (
	byErrors = func(c Class) bool { return c.Errors || c.Delays }
	by5xx    = func(c Class) bool { return c.Errors }
	bySlow   = func(c Class) bool { return c.Delays }
	byStuck  = func(c Class) bool { return c.Holds }
)

// checkDistress is the last rule: when the load itself shows distress —
// requests failing, a slow tail, throughput collapsing, connections left
// stuck — and no finding explains it, netdoctor does not call the run
// healthy. It says what the load showed, with its numbers, what was
// checked and found clean, and what to measure next.
func checkDistress(in *Input) []report.Finding {
	r := in.Run
	if r == nil || r.Load == nil {
		return nil
	}
	var open []symptom
	for _, s := range symptoms(in) {
		explained := false
		for _, f := range in.Found {
			if c := ClassOf(f.ID); f.Status == report.Active && s.by(c) && c.counts(f) {
				explained = true
			}
		}
		if !explained {
			open = append(open, s)
		}
	}
	if len(open) == 0 {
		return nil
	}
	side := report.Client
	if r.Server() != nil {
		side = r.ServerSide()
	}
	f := report.Finding{ID: UnexplainedDistress, Severity: report.Critical, Status: report.Active, Side: side,
		Title: "The load shows distress that no finding explains: " + open[0].text}
	for _, s := range open {
		f.Evidence = append(f.Evidence, report.Item{Text: s.text, Source: "load", Window: true})
	}
	if len(in.Clean) > 0 {
		f.Evidence = append(f.Evidence, report.Item{Text: "checked and found nothing active: " + strings.Join(in.Clean, ", "), Source: "netdoctor"})
	}
	if len(in.Rose) > 0 {
		f.Evidence = append(f.Evidence, report.Item{Text: "rose, below what makes a finding: " + strings.Join(in.Rose, "; "), Source: "netdoctor", Window: true})
	}
	if w := workersText(r); w != "" {
		f.Evidence = append(f.Evidence, report.Item{Text: w, Source: "wchan", Window: true})
	}
	f.Evidence = append(f.Evidence, serverWords(r)...)
	f.Actions = notes(nextMeasurements(r)...)
	return []report.Finding{f}
}

// symptoms are the ways the run's load showed distress.
func symptoms(in *Input) []symptom {
	lr := in.Run.Load
	var out []symptom
	tried := lr.Requests + lr.Errors.Total()
	if e := lr.Errors.Total(); e > 0 && (e >= 10 || 1000*e >= tried) {
		out = append(out, symptom{fmt.Sprintf("%d of %d requests failed (connect %d, read %d, write %d, timeout %d)",
			e, tried, lr.Errors.Connect, lr.Errors.Read, lr.Errors.Write, lr.Errors.Timeout), byErrors})
	}
	if n := lr.Status["5xx"]; n > 0 && 100*n >= lr.Requests {
		out = append(out, symptom{fmt.Sprintf("%d of %d responses were 5xx", n, lr.Requests), by5xx})
	}
	if l := lr.Latency; lr.Requests > 0 && (l.P99 >= time.Second || (l.P99 >= 100*time.Millisecond && l.P99 >= 10*l.P50)) {
		out = append(out, symptom{fmt.Sprintf("a slow tail: p99 %v against a p50 of %v (max %v)", l.P99.Round(time.Millisecond), l.P50.Round(time.Millisecond/10), l.Max.Round(time.Millisecond)), bySlow})
	}
	if s := stalls(lr.Timeline); s > 0 {
		out = append(out, symptom{fmt.Sprintf("throughput fell to nothing for %d whole second(s) while connections were open", s), byErrors})
	}
	if sh := in.Shape; (sh.Pattern == "saw-tooth" || sh.Pattern == "step" && steppedDown(lr.Timeline, sh)) && len(sh.MovedWith) == 0 {
		out = append(out, symptom{sh.Text, byErrors})
	}
	if n := stuck(in); n >= 5 {
		out = append(out, symptom{fmt.Sprintf("%d connections were left in CLOSE_WAIT on the server's port after the load: the server had not yet closed connections its client closed, busy or stuck elsewhere", n), byStuck})
	}
	return out
}

// stalls counts the whole seconds of the load, past its first, in which
// no response came while connections were open.
func stalls(tl []load.Second) int {
	n := 0
	for i, s := range tl {
		if i > 0 && s.Length >= time.Second && s.Requests == 0 && s.OpenConns > 0 {
			n++
		}
	}
	return n
}

// steppedDown reports a step to under half the throughput before it.
func steppedDown(tl []load.Second, sh report.Shape) bool {
	if len(sh.Seconds) == 0 {
		return false
	}
	var before, after []float64
	for i, s := range tl {
		if s.Length < 500*time.Millisecond {
			continue
		}
		v := float64(s.Requests) / s.Length.Seconds()
		if i < sh.Seconds[0] {
			before = append(before, v)
		} else {
			after = append(after, v)
		}
	}
	return len(before) > 0 && len(after) > 0 && mean(after) < 0.5*mean(before)
}

// stuck is how many connections to the run's target port were in
// CLOSE_WAIT on the server's side at the end of the tail.
func stuck(in *Input) int {
	s := in.Run.Server()
	if s == nil || s.Bundle == nil || len(s.Bundle.Snapshots) == 0 {
		return 0
	}
	last := s.Bundle.Snapshots[len(s.Bundle.Snapshots)-1]
	if last.Sockets == nil {
		return 0
	}
	n := 0
	for _, l := range last.Sockets.Listeners {
		if l.Proto != "unix" && fmt.Sprint(l.Port) == in.Run.Port {
			n = max(n, l.CloseWait)
		}
	}
	return n
}

// workersText is what the servers' threads did during the load when
// they were sampled: busy on what, or idle.
func workersText(r *evidence.Run) string {
	var parts []string
	for _, s := range r.Servers {
		smps := r.Samples(s)
		if len(smps) == 0 {
			continue
		}
		sh, total := waitShares(smps)
		busy, futex := 0, 0
		for _, x := range sh {
			if x.class == app.WaitLock {
				futex = x.n
			} else {
				busy += x.n
			}
		}
		switch {
		case busy > 0:
			parts = append(parts, fmt.Sprintf("%s on %s: %s", s.Kind, s.Addr, describeWaits(sh, total)))
		case futex > 0:
			parts = append(parts, fmt.Sprintf("%s on %s: none busy when sampled, its threads on a futex (idle, or parked by a runtime that multiplexes requests over them: its sockets and the timeline are the evidence then)", s.Kind, s.Addr))
		default:
			parts = append(parts, fmt.Sprintf("%s on %s: none busy when sampled", s.Kind, s.Addr))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "the server's threads during the load, sampled each second: " + strings.Join(parts, "; ")
}

// nextMeasurements are what to measure when no rule explains the
// distress: where the slow or failed requests spent their time.
func nextMeasurements(r *evidence.Run) []string {
	pid := "PID"
	for _, s := range r.Servers {
		if s.Role == "front" && len(s.PIDs) > 0 {
			pid = fmt.Sprint(s.PIDs[0])
			if s.Master != 0 {
				pid = fmt.Sprint(s.Master)
			}
		}
	}
	out := []string{
		"find when and which requests suffered: the HTML report's timeline (run --html), and the server's own access log with response times",
		"see where the server's threads wait while it is slow: `perf trace -s -p " + pid + "` or bcc's `offcputime -p " + pid + "`, and the runtime's own view (jstack, py-spy dump, /debug/pprof/goroutine, a php-fpm slowlog)",
		"look for slow calls to what the server depends on: `strace -f -T -e trace=network,poll,futex -p " + pid + "` (a database, a cache, a name lookup, a lock)",
		"capture the slow requests on the wire: `tcpdump -i any -w slow.pcap port " + r.Port + "` during a run, for retransmissions, resets and gaps the counters did not show",
	}
	if slices.ContainsFunc(r.Servers, func(s *app.Server) bool { return len(s.Samples) == 0 }) || len(r.Servers) == 0 {
		out = append(out, "run netdoctor with the server's namespace (--server-netns) or on its host, so that its workers and sockets are sampled too")
	}
	return out
}

// serverWords are what the servers wrote in their logs during the run
// that netdoctor has no class for: each log's most frequent shapes of
// line with their counts and one line each, beside the distress they
// coincide with. The reader judges whether they explain it; netdoctor
// does not guess a cause from words it does not know.
func serverWords(r *evidence.Run) []report.Item {
	var out []report.Item
	for _, s := range r.Servers {
		for _, l := range s.Logs {
			if l.Kind == "access" || len(l.Messages) == 0 {
				continue
			}
			var parts []string
			for _, k := range l.TopMessages(3) {
				parts = append(parts, fmt.Sprintf("%d× %q (first: %q)", l.Messages[k], k, l.MessageSamples[k]))
			}
			out = append(out, report.Item{Text: fmt.Sprintf("%s's log %s wrote %d lines during the run; most often: %s", s.Kind, l.Path, l.Lines, strings.Join(parts, "; ")), Source: "log", Window: true})
		}
	}
	return out
}
