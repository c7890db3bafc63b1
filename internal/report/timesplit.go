package report

import (
	"fmt"
	"strings"
	"time"
)

// Buckets of a TimeSplit: where a request's time went.
const (
	BucketThrottled = "throttled"       // its thread was runnable, held by the cgroup's CPU quota
	BucketWaiting   = "waiting-for-cpu" // runnable, waiting for a CPU other threads held
	BucketOnCPU     = "on-cpu"          // running
	BucketOffCPU    = "off-cpu:"        // prefix: blocked, on the wait class that follows ("off-cpu:network")
	BucketUnread    = "unread"          // sent, waiting in the server's socket for the server to read it
	BucketOutside   = "outside-threads" // in no server thread: queues, the network, a dependency waited on through epoll

	// The answer's time in the server's socket, from the write to the
	// last acknowledgement, by what held its sender (tcp_info's
	// accounting of the load's connections): BucketSocket prefixes them.
	BucketSocket          = "socket:"
	BucketInFlight        = "socket:in-flight"           // in flight, one round trip an answer: the network's own time
	BucketCwnd            = "socket:cwnd"                // more round trips than one, held by the congestion window
	BucketCwndIdleRestart = "socket:cwnd-idle-restart"   // … a window restarted from the initial one after idle (tcp_slow_start_after_idle)
	BucketCwndLoss        = "socket:cwnd-loss"           // … a window cut after loss
	BucketCwndNewConn     = "socket:cwnd-new-connection" // … a new connection's initial window, in slow start
	BucketRwnd            = "socket:rwnd"                // held by the receiver's window
	BucketSndbuf          = "socket:sndbuf"              // held by the sender's own send buffer
	BucketRTO             = "socket:rto"                 // waiting for retransmission timeouts
)

// TimeSplit is where the load's requests spent their time: the
// servers' threads' time (as the scheduler and the cgroup account it)
// per request, and the rest of the mean latency outside those threads,
// for the load's p50 and p99 (the latter from the seconds the tail came
// from).
type TimeSplit struct {
	// Servers are the servers whose threads were accounted.
	Servers []string `json:"servers"`
	P50     Split    `json:"p50"`
	P99     Split    `json:"p99"`
	// PerRequest is the servers' threads' busy time per request, over
	// the load: what Little's law compares with the mean latency.
	PerRequest time.Duration `json:"per_request_ns"`
	// Socket is what held the answers in the server's sockets, from the
	// kernel's accounting of the load's connections (nil without it).
	Socket *SocketTime `json:"socket,omitempty"`
}

// SocketTime is the answers' time in the server's sockets over the
// load, per answer: the senders' busy time (tcpi_busy_time: data in
// flight or waiting to be sent) and its parts, and what the kernel
// showed of its causes.
type SocketTime struct {
	// Of is what was accounted: "peer 10.0.0.2" (the load's own
	// connections, by the client's address as the server sees it) or
	// "listener :80" (every connection of the front port).
	Of string `json:"of"`
	// Busy is the senders' busy time per answer; MinRTT the lowest
	// round trip the connections measured, on average, and RTT their
	// smoothed one.
	Busy   time.Duration `json:"busy_ns"`
	MinRTT time.Duration `json:"min_rtt_ns"`
	RTT    time.Duration `json:"rtt_ns"`
	// Answers are the answers it is divided by; IdleResumes the answers
	// sent after an idle longer than the RTO, Restarts those whose
	// window the kernel restarted (RestartCwnd the mean window before),
	// Retrans and RTOs the segments retransmitted and the timeouts, and
	// NewConns the connections opened.
	Answers     uint64  `json:"answers"`
	IdleResumes uint64  `json:"idle_resumes,omitempty"`
	Restarts    uint64  `json:"restarts,omitempty"`
	RestartCwnd float64 `json:"restart_cwnd,omitempty"`
	Retrans     uint64  `json:"retrans,omitempty"`
	RTOs        uint64  `json:"rtos,omitempty"`
	NewConns    uint64  `json:"new_conns,omitempty"`
	// Parts are the busy time per answer by socket bucket.
	Parts map[string]time.Duration `json:"parts"`
}

// Split is one latency and its parts, largest first.
type Split struct {
	Latency time.Duration `json:"latency_ns"`
	Parts   []Part        `json:"parts"`
}

// Part is a bucket's share of a latency.
type Part struct {
	Bucket string        `json:"bucket"`
	Share  float64       `json:"share"`
	Time   time.Duration `json:"time_ns"`
}

// Share is the part of bucket b in the split, 0 when none.
func (s Split) Share(b string) float64 {
	for _, p := range s.Parts {
		if p.Bucket == b {
			return p.Share
		}
	}
	return 0
}

// BucketName says a bucket in words.
func BucketName(b string) string {
	switch {
	case b == BucketThrottled:
		return "throttled by the CPU quota"
	case b == BucketWaiting:
		return "waiting for a CPU"
	case b == BucketOnCPU:
		return "on CPU"
	case b == BucketUnread:
		return "unread in the server's sockets"
	case b == BucketOutside:
		return "outside the servers' threads"
	case b == BucketInFlight:
		return "in flight (the round trip)"
	case b == BucketCwnd:
		return "held by the congestion window"
	case b == BucketCwndIdleRestart:
		return "held by the congestion window restarted after idle"
	case b == BucketCwndLoss:
		return "held by the congestion window cut after loss"
	case b == BucketCwndNewConn:
		return "held by new connections' initial window"
	case b == BucketRwnd:
		return "held by the receiver's window"
	case b == BucketSndbuf:
		return "held by the send buffer"
	case b == BucketRTO:
		return "waiting for retransmission timeouts"
	case strings.HasPrefix(b, BucketOffCPU):
		return "off CPU (" + strings.TrimPrefix(b, BucketOffCPU) + ")"
	}
	return b
}

// Text is the split in one line: "p50 90ms ≈ throttled by the CPU quota
// 63ms (70%), on CPU 18ms (20%), …; p99 …".
func (t *TimeSplit) Text() string {
	one := func(name string, s Split) string {
		var parts []string
		for _, p := range s.Parts {
			if p.Share < 0.01 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %s (%.0f%%)", BucketName(p.Bucket), Dur(p.Time), 100*p.Share))
		}
		return fmt.Sprintf("%s %s ≈ %s", name, Dur(s.Latency), strings.Join(parts, ", "))
	}
	return one("p50", t.P50) + "; " + one("p99", t.P99)
}
