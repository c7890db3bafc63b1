package rules

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// shapeCounters are the counters a throughput collapse can be tied to.
var shapeCounters = []string{
	"conntrack.drop", "conntrack.early_drop", "TcpExtListenOverflows", "TcpExtTCPReqQFullDrop",
	"TcpExtTCPTimeWaitOverflow", "TcpExtTCPTimeouts", "TcpRetransSegs", "TcpAttemptFails",
}

// analyse finds the shape of the load's throughput and the counters of
// the bundle that moved with it.
func analyse(tl []load.Second, b *evidence.Bundle) report.Shape {
	rps := make([]float64, 0, len(tl))
	for _, s := range tl {
		if s.Length >= 500*time.Millisecond {
			rps = append(rps, float64(s.Requests)/s.Length.Seconds())
		}
	}
	sh := report.Shape{Pattern: "steady", Text: "throughput steady"}
	if len(rps) < 4 {
		sh.Text = "too short to judge the throughput's shape"
		return sh
	}
	if c := collapses(rps); len(c) >= 2 {
		sh.Pattern, sh.Seconds = "saw-tooth", c
	} else if at, ok := step(rps); ok {
		sh.Pattern, sh.Seconds = "step", []int{at}
	} else {
		return sh
	}
	sh.MovedWith = movedWith(tl, b, sh.Seconds, sh.Pattern == "step")
	switch sh.Pattern {
	case "saw-tooth":
		sh.Text = fmt.Sprintf("throughput saw-tooth: collapsed in seconds %v and recovered each time", sh.Seconds)
	default:
		sh.Text = fmt.Sprintf("throughput stepped from %.0f to %.0f req/s at second %d", mean(rps[:sh.Seconds[0]]), mean(rps[sh.Seconds[0]:]), sh.Seconds[0])
	}
	if len(sh.MovedWith) > 0 {
		sh.Text += "; in step with " + strings.Join(sh.MovedWith, ", ")
	}
	return sh
}

// collapses returns the seconds where throughput fell under half of the
// best second before it and then came back over 80 % of it.
func collapses(rps []float64) []int {
	var out []int
	best := rps[0]
	for i := 1; i < len(rps)-1; i++ {
		best = max(best, rps[i-1])
		if rps[i] >= 0.5*best {
			continue
		}
		for j := i + 1; j < len(rps); j++ {
			if rps[j] >= 0.8*best {
				out = append(out, i)
				i = j
				break
			}
		}
	}
	return out
}

// step finds the split where the means before and after differ most; a
// change of over 40 % with both sides steady is a step.
func step(rps []float64) (int, bool) {
	bestAt, bestGap := 0, 0.0
	for k := 2; k <= len(rps)-2; k++ {
		a, b := mean(rps[:k]), mean(rps[k:])
		if gap := abs(a-b) / max(a, b); gap > bestGap {
			bestAt, bestGap = k, gap
		}
	}
	return bestAt, bestGap > 0.4
}

// movedWith returns the counters whose rate in the marked seconds (or,
// for a step, from the step on) exceeds twice their rate elsewhere.
func movedWith(tl []load.Second, b *evidence.Bundle, marked []int, fromOn bool) []string {
	if b == nil || len(b.Snapshots) < 2 {
		return nil
	}
	in := map[int]bool{}
	for _, m := range marked {
		in[m] = true
	}
	var out []string
	for _, c := range shapeCounters {
		var hot, cold, nh, nc float64
		for i, s := range tl {
			r := b.RateAt(c, s.Start.Add(s.Length/2))
			if in[i] || (fromOn && i >= marked[0]) {
				hot, nh = hot+r, nh+1
			} else {
				cold, nc = cold+r, nc+1
			}
		}
		if nh == 0 || nc == 0 {
			continue
		}
		if h, k := hot/nh, cold/nc; h > 0 && h > 2*k {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func mean(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// tieShape gives the throughput's shape to the findings whose counters
// moved with it (Finding.Shape): the saw-tooth of seed 002 belongs to the
// conntrack drops that rose in step with each collapse.
func tieShape(fs []report.Finding, sh report.Shape) {
	if len(sh.MovedWith) == 0 {
		return
	}
	moved := map[string]bool{}
	for _, c := range sh.MovedWith {
		moved[c] = true
	}
	for i := range fs {
		for _, e := range fs[i].Evidence {
			if moved[e.Source] {
				fs[i].Shape = &sh
				break
			}
		}
	}
}
