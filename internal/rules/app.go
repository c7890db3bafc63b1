package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Helpers of the rules that read the servers behind a run's port.

// waitShares sums the wait classes of the busy worker threads over the
// samples (idle ones left out) and returns them largest first, with the
// number of busy thread-samples.
func waitShares(smps []app.Sample) ([]share, int) {
	sum := map[string]int{}
	total := 0
	for _, s := range smps {
		for c, n := range s.Waits {
			if c == app.WaitIdle {
				continue
			}
			sum[c] += n
			total += n
		}
	}
	var out []share
	for c, n := range sum {
		out = append(out, share{c, n})
	}
	// Largest first; equal shares by name, so that reports do not
	// change order from one reading of the same evidence to the next.
	slices.SortFunc(out, func(a, b share) int { return cmp.Or(b.n-a.n, strings.Compare(a.class, b.class)) })
	return out, total
}

type share struct {
	class string
	n     int
}

// describeWaits is "sleep 92%, running 6%, network 2%".
func describeWaits(sh []share, total int) string {
	var parts []string
	for _, s := range sh {
		if p := 100 * s.n / total; p >= 1 {
			parts = append(parts, fmt.Sprintf("%s %d%%", s.class, p))
		}
	}
	return strings.Join(parts, ", ")
}

// hostBusy is the share of CPU time the side's host spent busy between
// the snapshots around the load.
func hostBusy(b *evidence.Bundle, from, to time.Time) (float64, bool) {
	if b == nil {
		return 0, false
	}
	var first, last *evidence.Snapshot
	for i := range b.Snapshots {
		s := &b.Snapshots[i]
		if !s.Time.After(from) || first == nil {
			first = s
		}
		if !s.Time.Before(to) && last == nil {
			last = s
		}
	}
	if last == nil && len(b.Snapshots) > 0 {
		last = &b.Snapshots[len(b.Snapshots)-1]
	}
	if first == nil || last == nil || first == last {
		return 0, false
	}
	agg := func(s *evidence.Snapshot) (evidence.CPU, bool) {
		for _, c := range s.CPU {
			if c.CPU < 0 {
				return c, true
			}
		}
		return evidence.CPU{}, false
	}
	a, ok1 := agg(first)
	z, ok2 := agg(last)
	if !ok1 || !ok2 || z.Total() <= a.Total() {
		return 0, false
	}
	idle := float64((z.Idle + z.IOWait) - min(a.Idle+a.IOWait, z.Idle+z.IOWait))
	return 1 - idle/float64(z.Total()-a.Total()), true
}

// peakRecvQ is the longest accept queue a listener at addr had in the
// load window, with its backlog.
func peakRecvQ(b *evidence.Bundle, addr string, r *evidence.Run) (q, backlog uint32) {
	if b == nil {
		return 0, 0
	}
	for _, s := range b.Snapshots {
		if s.Time.Before(r.LoadStart) || s.Sockets == nil {
			continue
		}
		for _, l := range s.Sockets.Listeners {
			if l.Addr == addr && l.RecvQ >= q {
				q, backlog = l.RecvQ, l.SendQ
			}
		}
	}
	return q, backlog
}

func logItem(s *app.Server, class, what string) (string, int) {
	n := app.Count(s.Logs, class)
	if n == 0 {
		return "", 0
	}
	line, path := app.FirstLine(s.Logs, class)
	if len(line) > 220 {
		line = line[:220] + "…"
	}
	return fmt.Sprintf("%s logged %d× %s during the run (%s), e.g. %q", s.Kind, n, what, path, line), n
}

func logStatuses(servers []*app.Server) map[int]int {
	out := map[int]int{}
	for _, s := range servers {
		for _, l := range s.Logs {
			for code, n := range l.Statuses {
				out[code] += n
			}
		}
	}
	return out
}
