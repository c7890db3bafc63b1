package rules

import (
	"cmp"
	"slices"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// minSplitRequests is the fewest responses a split is computed from.
const minSplitRequests = 20

// TimeSplit says where the load's requests spent their time, from the
// servers' CPU accounting (nil without a load or without accounting).
//
// The servers' threads' busy time — on CPU, runnable (held by the quota
// or waiting for a CPU), and off CPU on a wait that holds a request (not
// idle; not a futex in a runtime that parks its idle threads on one) —
// is divided by the requests answered: the time a request spent in
// those threads (Little's law). What the mean latency holds beyond it
// was spent outside them: in queues, on the network, on a dependency
// waited for through epoll. Requests outside the threads queue for
// them (a Go program's goroutines, an event loop's ready connections):
// as much of the outside time as the threads' busy time was held
// runnable (throttled or waiting for a CPU) goes to those causes.
//
// The p50 is split as the whole load's time went; the p99 as the time
// of the seconds the tail came from (those whose own p99 reached the
// load's).
func TimeSplit(r *Run) *report.TimeSplit {
	lr := r.Load
	if lr == nil || lr.Requests < minSplitRequests || lr.Latency.Mean <= 0 {
		return nil
	}
	tl := lr.Timeline
	all := make([]bool, len(tl))
	tail := make([]bool, len(tl))
	anyTail := false
	for i, s := range tl {
		all[i] = s.Requests > 0
		if s.Requests > 0 && s.P99 >= lr.Latency.P99 {
			tail[i], anyTail = true, true
		}
	}
	if !anyTail {
		tail = all
	}
	ts := &report.TimeSplit{}
	b50, n50, names := r.threadTime(tl, all)
	if n50 == 0 || len(b50) == 0 {
		return nil
	}
	ts.Servers = names
	busy := sumBuckets(b50)
	ts.PerRequest = busy / time.Duration(n50)
	ts.P50 = split(b50, n50, lr.Latency.Mean, lr.Latency.P50)
	b99, n99, _ := r.threadTime(tl, tail)
	if n99 == 0 || len(b99) == 0 {
		b99, n99 = b50, n50
	}
	ts.P99 = split(b99, n99, lr.Latency.Mean, lr.Latency.P99)
	return ts
}

// split turns the threads' time in buckets over n requests into the
// parts of latency.
func split(b map[string]time.Duration, n uint64, mean, latency time.Duration) report.Split {
	busy := sumBuckets(b)
	if busy <= 0 || n == 0 {
		return report.Split{Latency: latency, Parts: []report.Part{{Bucket: report.BucketOutside, Share: 1, Time: latency}}}
	}
	in := min(1, float64(busy)/float64(n)/float64(mean))
	held := float64(b[report.BucketThrottled]+b[report.BucketWaiting]) / float64(busy)
	out := 1 - in
	shares := map[string]float64{}
	for k, v := range b {
		shares[k] = in * float64(v) / float64(busy)
	}
	if held > 0 && out > 0 {
		// Requests queued for threads that were themselves held: as
		// much of the outside time as the threads' busy time was held.
		moved := out * held
		hw := b[report.BucketThrottled] + b[report.BucketWaiting]
		shares[report.BucketThrottled] += moved * float64(b[report.BucketThrottled]) / float64(hw)
		shares[report.BucketWaiting] += moved * float64(b[report.BucketWaiting]) / float64(hw)
		out -= moved
	}
	if out > 0 {
		shares[report.BucketOutside] = out
	}
	s := report.Split{Latency: latency}
	for k, v := range shares {
		if v > 0 {
			s.Parts = append(s.Parts, report.Part{Bucket: k, Share: v, Time: time.Duration(v * float64(latency))})
		}
	}
	slices.SortFunc(s.Parts, func(a, b report.Part) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(a.Bucket, b.Bucket))
	})
	return s
}

func sumBuckets(b map[string]time.Duration) time.Duration {
	var t time.Duration
	for _, v := range b {
		t += v
	}
	return t
}

// threadTime sums the servers' accounted thread time in the load
// seconds marked in use, by bucket, and the requests answered in them.
func (r *Run) threadTime(tl []load.Second, use []bool) (map[string]time.Duration, uint64, []string) {
	var n uint64
	for i, s := range tl {
		if use[i] {
			n += s.Requests
		}
	}
	b := map[string]time.Duration{}
	var names []string
	for _, s := range r.Servers {
		counted := false
		for _, smp := range s.Samples {
			c := smp.CPU
			if c == nil || c.Span <= 0 {
				continue
			}
			mid := smp.Time.Add(-c.Span / 2)
			i := second(tl, mid)
			if i < 0 || !use[i] {
				continue
			}
			counted = true
			th, w := c.Split()
			b[report.BucketThrottled] += th
			b[report.BucketWaiting] += w
			b[report.BucketOnCPU] += c.OnCPU
			off := c.OffCPU()
			blocked, total := heldWaits(smp, s.Runtime)
			if total > 0 {
				for class, k := range blocked {
					b[report.BucketOffCPU+class] += time.Duration(float64(off) * float64(k) / float64(total))
				}
			}
		}
		if counted {
			names = append(names, s.Kind+" "+s.Addr)
		}
	}
	for k, v := range b {
		if v <= 0 {
			delete(b, k)
		}
	}
	return b, n, names
}

// heldWaits are the sample's off-CPU threads by the wait classes that
// hold a request, and the off-CPU threads in all: idle threads wait for
// work, not in a request; a futex is a lock except in runtimes whose
// idle threads park on one (Go, the JVM, Node's pool); and a Go thread
// in nanosleep is the runtime's monitor (a goroutine's sleep parks the
// goroutine, not a thread).
func heldWaits(smp app.Sample, rt *app.Runtime) (map[string]int, int) {
	held := map[string]int{}
	total := 0
	parks := rt != nil && (rt.Name == app.RuntimeGo || rt.Name == app.RuntimeJava || rt.Name == app.RuntimeNode)
	for class, k := range smp.Waits {
		if class == app.WaitRunning {
			continue
		}
		total += k
		if class == app.WaitIdle || class == app.WaitLock && parks || class == app.WaitSleep && rt != nil && rt.Name == app.RuntimeGo {
			continue
		}
		held[class] += k
	}
	return held, total
}

// second is the index of the load second holding t, -1 for none.
func second(tl []load.Second, t time.Time) int {
	for i, s := range tl {
		if !t.Before(s.Start) && t.Before(s.Start.Add(s.Length)) {
			return i
		}
	}
	return -1
}
