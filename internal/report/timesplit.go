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
