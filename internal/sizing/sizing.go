// Package sizing turns what a run measured into the values a fix sets:
// one formula per setting, shared by the findings' advice and by
// `tune plan`, so that the number a finding prints is the number the
// plan proposes.
package sizing

import (
	"fmt"
	"math"
)

// The kernel's and the applications' own defaults and limits.
const (
	DefaultSomaxconn = 4096  // net.core.somaxconn since 5.4
	NginxBacklog     = 511   // NGX_LISTEN_BACKLOG on Linux
	MaxBacklog       = 65535 // what a backlog is worth past: the kernel keeps it in a u32, but a queue this deep is latency, not capacity
	TimeWait         = 60    // TCP_TIMEWAIT_LEN, seconds
	DefaultPortWidth = 28232 // 32768–60999
	PortRangeHigh    = 65535
	portRangeLow     = 10000 // below it live the registered services' ports
	MinKeepalive     = 16
	MaxKeepalive     = 128
	PoolSpareMin     = 4 // php-fpm workers beyond the requests in flight, at least
	PoolStatus       = 1 // the status page takes a worker too
	MinConntrackMax  = 65536
	// MinTWBuckets is the kernel's tcp_max_tw_buckets with 4 GiB of
	// memory or more: TIME_WAIT sockets are cheap, so no host needs
	// fewer.
	MinTWBuckets      = 262144
	ConntrackTimeWait = 120 // nf_conntrack_tcp_timeout_time_wait default, seconds
	// Margin is the headroom over a rate × lifetime estimate.
	Margin = 1.25
)

// Keepalive is nginx's per-worker cache of idle upstream connections:
// each worker's share of the requests in flight, rounded up to a power
// of two, between MinKeepalive and MaxKeepalive. nginx opens a
// connection only when none is idle, so a cache that large opens no more
// once warm. inflight 0 (unknown) gives MinKeepalive.
func Keepalive(inflight, workers int) int {
	workers = max(workers, 1)
	if inflight <= 0 {
		return MinKeepalive
	}
	return clamp(NextPow2((inflight+workers-1)/workers), MinKeepalive, MaxKeepalive)
}

// KeepaliveWhy says how Keepalive(inflight, workers) came out.
func KeepaliveWhy(inflight, workers int) string {
	k := Keepalive(inflight, workers)
	if inflight <= 0 {
		return fmt.Sprintf("keepalive %d per worker: the requests in flight are unknown without a load (netdoctor run sizes it from them), so the minimum", k)
	}
	return fmt.Sprintf("keepalive %d per worker: %d requests in flight over %d workers, rounded up to a power of two (between %d and %d)", k, inflight, max(workers, 1), MinKeepalive, MaxKeepalive)
}

// WorkerConnections is nginx's worker_connections for clients held at
// once over workers: each worker's share, with an upstream connection
// for each (per), doubled and rounded up to a power of two.
func WorkerConnections(clients, workers int) (want, per int) {
	workers = max(workers, 1)
	per = 2 * ((clients + workers - 1) / workers)
	return NextPow2(2 * per), per
}

// Pool is php-fpm's pm.max_children for the requests in flight: those
// plus an eighth spare (at least PoolSpareMin) and one for the status
// page, and at least twice the current size. inflight 0 (unknown)
// counts as twice the current size. spare is the eighth.
func Pool(inflight, current int) (want, spare int) {
	if inflight <= 0 {
		inflight = 2 * current
	}
	spare = max(PoolSpareMin, inflight/8)
	return max(inflight+spare+PoolStatus, 2*current), spare
}

// PortHold is how long, in seconds, a closed connection keeps its local
// port from a new connection to the same destination: TIME_WAIT, or 1 s
// with tcp_tw_reuse = 1 (a TIME_WAIT port older than that may be taken).
func PortHold(twReuse bool) float64 {
	if twReuse {
		return 1
	}
	return TimeWait
}

// Ports is the ephemeral range for connections opened at rate per second
// to one destination, each holding its port for life seconds (TimeWait;
// 1 with tcp_tw_reuse on): need ports with the margin, at least the
// kernel default's width. widen is false when the current range (cur
// ports wide) already holds that; else the range ends at PortRangeHigh
// and starts on a thousand (even: the kernel prefers start and end of
// different parity), never below 10000.
func Ports(rate, life float64, cur int) (need, lo, hi int, widen bool) {
	need = int(math.Ceil(rate * life * Margin))
	width := clamp(need, DefaultPortWidth, PortRangeHigh-portRangeLow+1)
	if cur >= width {
		return need, 0, 0, false
	}
	lo = (PortRangeHigh + 1 - width) / 1000 * 1000
	return need, lo, PortRangeHigh, true
}

// Backlog is an accept queue that holds a burst of connections opened at
// once and the connections arriving (per second) during the service's
// slowest responses (p99, seconds, at least 100 ms) when the application
// does not accept: need, doubled and rounded up to a power of two, at
// most MaxBacklog. Never below the kernel's default somaxconn: a backlog
// is a limit, not memory (an empty queue costs nothing), so sizing
// matters only above what the kernel allows by default. It is both the
// listen() backlog to ask for and the somaxconn that lets it through.
func Backlog(burst int, arrivals, p99 float64) (want int, need float64) {
	need = max(float64(burst), math.Ceil(arrivals*max(p99, 0.1)))
	return clamp(NextPow2(int(2*need)), DefaultSomaxconn, MaxBacklog), need
}

// BacklogWhy says how Backlog came out; counted says how the arrivals
// were counted ("" when there is nothing to add).
func BacklogWhy(burst int, arrivals float64, counted string, p99 float64) string {
	want, need := Backlog(burst, arrivals, p99)
	during := fmt.Sprintf("for %.0f ms (the load's p99, at least 100 ms)", 1000*max(p99, 0.1))
	if p99 <= 0 {
		during = "for 100 ms (the responses' p99 is unknown without a load; at least 100 ms)"
	}
	what := fmt.Sprintf("%.0f new connections/s arriving %s while the application does not accept", arrivals, during)
	if counted != "" {
		what += " (" + counted + ")"
	}
	if burst > 0 {
		what = fmt.Sprintf("a burst of %d connections opened at once and %s", burst, what)
	}
	return fmt.Sprintf("%s: %.0f; twice that as a power of two, at least the kernel's default %d (a backlog is a limit, not memory): %d",
		what, need, DefaultSomaxconn, want)
}

// Conntrack is nf_conntrack_max for new connections at rate per second,
// each kept for tw seconds after it closes
// (nf_conntrack_tcp_timeout_time_wait): need entries with the margin,
// or twice the most seen (peak; the maximum when the table was full),
// rounded up to a power of two; never below the hash's buckets, which is
// what the kernel itself sets the maximum to (since 5.15), nor below
// MinConntrackMax.
func Conntrack(rate, tw float64, peak, buckets uint64) (want, need uint64) {
	need = uint64(math.Ceil(rate * tw * Margin))
	return max(uint64(NextPow2(int(max(need, 2*peak)))), buckets, MinConntrackMax), need
}

// NextPow2 is the smallest power of two ≥ n (1 for n ≤ 1).
func NextPow2(n int) int {
	p := 1
	for p < n {
		p <<= 1
	}
	return p
}

func clamp(v, lo, hi int) int { return min(max(v, lo), hi) }

// Neighbour sizes the neighbour table's thresholds (gc_thresh1, 2, 3)
// from the hard limit in force: four times it, at least 8192, a power of
// two, with the kernel's own ratios below it (128, 512, 1024 by default:
// an eighth and a half). Entries cost about 500 bytes: 8192 of them are
// 4 MiB.
func Neighbour(thresh3 int) (t1, t2, t3 int) {
	t3 = NextPow2(max(4*thresh3, 8192))
	return t3 / 8, t3 / 2, t3
}

// Workers sizes a pool of worker threads or processes that has no status
// page: the requests in flight plus an eighth spare (at least
// PoolSpareMin), at least twice the current size.
func Workers(inflight, current int) (want, spare int) {
	if inflight <= 0 {
		inflight = 2 * current
	}
	spare = max(PoolSpareMin, inflight/8)
	return max(inflight+spare, 2*current), spare
}

// Receive buffers of a datagram socket.
const (
	// RcvBufHold is how long a receiver may stall (a GC pause, a busy
	// moment) with its buffer still taking what arrives.
	RcvBufHold = 0.2 // seconds
	// DatagramTruesize is what one small datagram costs a receive
	// buffer: the kernel charges the whole skb (its truesize, 768 bytes
	// to 2 KiB), not the payload.
	DatagramTruesize = 2048
	MinRcvBuf        = 4 << 20
	MaxRcvBuf        = 64 << 20
)

// RcvBuf is the receive buffer (SO_RCVBUF, and net.core.rmem_max to
// allow it) a socket needs to hold RcvBufHold of what arrives at
// perSec datagrams a second: a power of two, between MinRcvBuf and
// MaxRcvBuf.
func RcvBuf(perSec float64) int {
	want := int(math.Ceil(perSec * RcvBufHold * DatagramTruesize))
	return clamp(NextPow2(max(want, MinRcvBuf)), MinRcvBuf, MaxRcvBuf)
}

// RcvBufWhy says how RcvBuf came out.
func RcvBufWhy(perSec float64) string {
	return fmt.Sprintf("%.0f datagrams/s arriving × %.1f s of stall × %d bytes each in the kernel's accounting, at least %d MiB, a power of two",
		perSec, RcvBufHold, DatagramTruesize, MinRcvBuf>>20)
}
