package rules

import (
	"cmp"
	"slices"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
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
// them (a Go program's goroutines, an event loop's ready connections)
// only as far as the threads are saturated: of the outside time, the
// share the threads' busy time was held runnable (throttled or waiting
// for a CPU), times the share of the threads' capacity that was busy
// (threadCapacity), goes to those causes. Threads idle most of the
// window leave a request nothing to queue for: their few held
// milliseconds are not the round trip's.
//
// Part of the outside time is measured: requests sent and still unread
// in the front servers' sockets, as the connections holding unread bytes
// sampled once a second count them (Little's law: their mean number
// over the requests answered a second). What the held threads do not
// explain of it goes to "unread": the server's threads or its runtime
// had not reached them (a full worker pool, an event loop or a Go
// program whose threads are all busy).
//
// The p50 is split as the whole load's time went; the p99 as the time
// of the seconds the tail came from (those whose own p99 reached the
// load's).
func TimeSplit(r *evidence.Run) *report.TimeSplit {
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
	b50, n50, names := threadTime(r, tl, all)
	if n50 == 0 || len(b50) == 0 {
		return nil
	}
	ts.Servers = names
	busy := sumBuckets(b50)
	ts.PerRequest = busy / time.Duration(n50)
	ts.Socket = socketTime(r, tl, all, n50)
	ts.P50 = split(b50, n50, capacity(r, tl, all), unreadTime(r, tl, all), ts.Socket, lr.Latency.Mean, lr.Latency.P50)
	b99, n99, _ := threadTime(r, tl, tail)
	u99, c99, s99 := unreadTime(r, tl, tail), capacity(r, tl, tail), socketTime(r, tl, tail, n99)
	if n99 == 0 || len(b99) == 0 {
		b99, n99, u99, c99, s99 = b50, n50, unreadTime(r, tl, all), capacity(r, tl, all), ts.Socket
	}
	ts.P99 = split(b99, n99, c99, u99, s99, lr.Latency.Mean, lr.Latency.P99)
	return ts
}

// unreadTime is the time the requests answered in the load seconds
// marked in use spent unread in the front servers' sockets, summed:
// each second's mean count of connections holding unread bytes on the
// servers' ports (evidence.Listener.Unread, one listener a port) times
// its length, a second without a sample counted as the mean of those
// with one; 0 from fewer than minUnreadLooks samples. The snapshot taken as the load began is left out: it finds
// every connection's first request just sent, a moment no later one
// resembles, where Little's law wants looks at any time.
func unreadTime(r *evidence.Run, tl []load.Second, use []bool) time.Duration {
	b := serverBundle(r)
	if b == nil {
		return 0
	}
	addrs := map[string]bool{}
	for _, s := range r.Servers {
		if s.Role == "front" {
			addrs[s.Addr] = true
		}
	}
	sum := make([]float64, len(tl))
	n := make([]int, len(tl))
	for _, snap := range b.Snapshots {
		if snap.Sockets == nil || snap.Time.Before(r.LoadStart.Add(loadStartLook)) {
			continue
		}
		i := second(tl, snap.Time)
		if i < 0 || !use[i] {
			continue
		}
		seen := map[string]bool{}
		for _, l := range snap.Sockets.Listeners {
			// Listeners of one port carry the same counts.
			if addrs[l.Addr] && l.Proto != "unix" && !seen[l.Addr] {
				seen[l.Addr] = true
				sum[i] += float64(l.Unread)
			}
		}
		if len(seen) > 0 {
			n[i]++
		}
	}
	var sampled, seconds, sampledSeconds float64
	looks := 0
	for i, s := range tl {
		if !use[i] {
			continue
		}
		seconds += s.Length.Seconds()
		looks += n[i]
		if n[i] > 0 {
			sampled += sum[i] / float64(n[i]) * s.Length.Seconds()
			sampledSeconds += s.Length.Seconds()
		}
	}
	if looks < minUnreadLooks {
		return 0
	}
	return time.Duration(sampled / sampledSeconds * seconds * float64(time.Second))
}

// minUnreadLooks is the fewest snapshots a time unread is measured
// from: one look at a count that moves by tens from second to second
// (a tail's second) is no mean.
const minUnreadLooks = 3

// loadStartLook is how long after the load's start a snapshot is still
// the one taken as it began.
const loadStartLook = 250 * time.Millisecond

// split turns the threads' time in buckets over n requests, of their
// capacity (the thread time that could have taken a request; 0: not
// known, taken as saturated), the time those requests spent unread in
// the servers' sockets, and what held their answers in those sockets
// (sock, per answer; nil: not accounted), into the parts of latency.
// What is measured is placed first: the threads' own time, then the
// answers' time in the sockets; the outside time's share queued for
// held threads is inferred from what is left.
func split(b map[string]time.Duration, n uint64, capacity, unread time.Duration, sock *report.SocketTime, mean, latency time.Duration) report.Split {
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
	if sock != nil && out > 0 {
		// The answers' time in the servers' sockets, measured by the
		// kernel per connection: at most what the threads left.
		var total time.Duration
		for _, v := range sock.Parts {
			total += v
		}
		if total > 0 {
			q := min(out, float64(total)/float64(mean))
			for k, v := range sock.Parts {
				shares[k] = q * float64(v) / float64(total)
			}
			out -= q
		}
	}
	if held > 0 && out > 0 {
		// Requests queued for threads that were themselves held: as
		// much of the outside time as the threads' busy time was held,
		// as far as the threads were saturated (a request that finds a
		// thread idle does not queue for one).
		sat := 1.0
		if capacity > 0 {
			sat = min(1, float64(busy)/float64(capacity))
		}
		moved := out * held * sat
		hw := b[report.BucketThrottled] + b[report.BucketWaiting]
		shares[report.BucketThrottled] += moved * float64(b[report.BucketThrottled]) / float64(hw)
		shares[report.BucketWaiting] += moved * float64(b[report.BucketWaiting]) / float64(hw)
		out -= moved
	}
	if unread > 0 && out > 0 {
		// The held threads' part of it is theirs already (moved).
		q := min(out, float64(unread)/float64(n)/float64(mean)*(1-held))
		shares[report.BucketUnread] = q
		out -= q
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
func threadTime(r *evidence.Run, tl []load.Second, use []bool) (map[string]time.Duration, uint64, []string) {
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

// capacity sums, over the servers' samples in the load seconds marked
// in use, the thread time that could have taken a request
// (threadCapacity): the same samples threadTime sums.
func capacity(r *evidence.Run, tl []load.Second, use []bool) time.Duration {
	var t time.Duration
	for _, s := range r.Servers {
		for _, smp := range s.Samples {
			c := smp.CPU
			if c == nil || c.Span <= 0 {
				continue
			}
			if i := second(tl, smp.Time.Add(-c.Span/2)); i >= 0 && use[i] {
				t += threadCapacity(*c, s.Runtime)
			}
		}
	}
	return t
}

// threadCapacity is the thread time of one interval that could have
// taken a request: every thread's, but in a runtime that parks its idle
// threads (Go, the JVM, Node) only as many threads as it runs code on
// at once (its configured parallelism, else the CPUs it may use), the
// others being spares that a saturated runtime keeps parked.
func threadCapacity(c app.CPU, rt *app.Runtime) time.Duration {
	parks := rt != nil && (rt.Name == app.RuntimeGo || rt.Name == app.RuntimeJava || rt.Name == app.RuntimeNode)
	if !parks {
		return c.ThreadTime
	}
	p := c.CPUs
	if rt.Parallelism > 0 {
		p = rt.Parallelism
	}
	if p <= 0 {
		return c.ThreadTime
	}
	return min(c.ThreadTime, time.Duration(p)*c.Span)
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
