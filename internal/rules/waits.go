package rules

import (
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Waits is where the load's requests waited outside the servers' own
// work, per request (report.Waits): the full pools of named threads
// (fullFamily) and each traced leg to a dependency, nil without a load
// or when there is neither.
func Waits(r *evidence.Run) *report.Waits {
	if r == nil || r.Load == nil || r.Load.Requests == 0 {
		return nil
	}
	lr := r.Load
	secs := lr.DurationS
	if secs <= 0 {
		secs = r.LoadEnd.Sub(r.LoadStart).Seconds()
	}
	if secs <= 0 {
		return nil
	}
	rate := float64(lr.Requests) / secs
	w := &report.Waits{}
	for _, s := range r.Servers {
		if p, ok := fullFamily(r, s); ok {
			w.Pools = append(w.Pools, report.PoolWait{Server: s.Kind + " " + s.Addr, Threads: p.family + "*", Size: p.size, Busy: p.busy, Service: p.service, Wait: p.wait})
		}
		for i := range s.Deps {
			if d, ok := depWait(s, &s.Deps[i], rate, lr.Latency.Mean); ok {
				w.Dependencies = append(w.Dependencies, d)
			}
		}
	}
	if len(w.Pools) == 0 && len(w.Dependencies) == 0 {
		return nil
	}
	return w
}

// depWait is one leg's time per request of the load.
func depWait(s *app.Server, d *app.Dependency, rate float64, mean time.Duration) (report.DependencyWait, bool) {
	if d.Untimed != "" || d.Multiplexed() || d.Conns == 0 || d.RoundTrip <= 0 || d.RoundTripsPerSec <= 0 {
		return report.DependencyWait{}, false
	}
	per := d.RoundTripsPerSec / rate
	w := report.DependencyWait{Server: s.Kind + " " + s.Addr, Addr: d.Addr, Conns: d.Conns, Busy: d.Busy, RoundTrips: per,
		Time: time.Duration(per * float64(d.RoundTrip)), Network: time.Duration(per * float64(d.MinRTT))}
	if n := d.Nagle; n != nil && d.Busy > 0 {
		// The held share of the looks is the share of the time data
		// waited: per busy round trip, that much of it.
		held := max(n.Answers, n.Requests)
		w.Stall = time.Duration(per * held / d.Busy * float64(d.RoundTrip))
	}
	if d.Busy >= depBusy && mean > w.Time {
		w.ConnWait = mean - w.Time
	}
	return w, true
}
