package report

import (
	"fmt"
	"math"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// LikeRow is one line of a before/after table: a figure of two loads,
// and its change.
type LikeRow struct {
	Name, Before, After, Change string
}

// LikeWithLike is what every before/after (compare, run --verify-with,
// lab --fixed and --tune, capacity --verify-with) puts first: the
// successful responses a second (goodput), the share of the requests
// that succeeded, and the latency of every request, failed ones counted
// at the time they failed or timed out. A run whose requests time out
// answers the few that get through fast, so its answered requests'
// latency compared with a healthy run's says the fix made it slower:
// make demo's seed 000 once read p50 906 µs → 21.7 ms for a fix that
// removed 389 timeouts. When either load predates the latency of every
// request, both sides show the answered requests', and say so.
func LikeWithLike(a, b *load.Result) []LikeRow {
	rows := []LikeRow{
		{"goodput (2xx/3xx per s)", fmt.Sprintf("%.0f", a.Goodput()), fmt.Sprintf("%.0f", b.Goodput()), ratio(a.Goodput(), b.Goodput())},
		{"success share", Percent(a.SuccessShare()), Percent(b.SuccessShare()), points(a.SuccessShare(), b.SuccessShare())},
	}
	la, lb, what := a.Latency, b.Latency, "answered only"
	if a.LatencyAll != nil && b.LatencyAll != nil {
		la, lb, what = *a.LatencyAll, *b.LatencyAll, "every request"
	}
	for _, q := range []struct {
		name string
		x, y time.Duration
	}{{"p50", la.P50, lb.P50}, {"p99", la.P99, lb.P99}, {"max", la.Max, lb.Max}} {
		x, y := "-", "-"
		if ended(a) > 0 {
			x = Dur(q.x)
		}
		if ended(b) > 0 {
			y = Dur(q.y)
		}
		rows = append(rows, LikeRow{"latency " + q.name + ", " + what, x, y, ratio(float64(q.x), float64(q.y))})
	}
	return rows
}

// ended counts the requests of a load that ended: answered, failed or
// never sent.
func ended(r *load.Result) uint64 { return r.Requests + r.Errors.Total() + r.Unsent }

// Percent formats a share as a percentage: "99.9 %", "100 %".
func Percent(v float64) string {
	switch {
	case v >= 1:
		return "100 %"
	case v >= 0.999:
		// Never round a failure away: 99.996 % is not 100 %.
		return fmt.Sprintf("%.2f %%", math.Floor(v*1e4)/100)
	}
	return fmt.Sprintf("%.1f %%", math.Floor(v*1e3)/10)
}

// points is the change of a share in percentage points.
func points(x, y float64) string {
	return fmt.Sprintf("%+.1f pts", 100*(y-x))
}

// EveryRequest is the line a load's text adds when some requests
// failed: the latency of every request, the success share and the
// goodput, with none of the words wrk's lines are found by; "" when all
// succeeded or the result predates the latency of every request.
func EveryRequest(r *load.Result) string {
	if r.LatencyAll == nil || r.Errors.Total()+r.Unsent == 0 && r.Good() == r.Requests {
		return ""
	}
	l := r.LatencyAll
	s := fmt.Sprintf("Every request, failed ones at the time they failed: p50 %s, p99 %s, max %s; success %s, goodput %.0f/s",
		Dur(l.P50), Dur(l.P99), Dur(l.Max), Percent(r.SuccessShare()), r.Goodput())
	if r.Unsent > 0 {
		s += fmt.Sprintf(" (%d never sent: every connection busy)", r.Unsent)
	}
	return s
}
