package load

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Segment is one worker's share of a load that several processes (a
// Kubernetes Indexed Job's pods) send together: worker Index of Count,
// counted from 1. Each worker runs the whole command with its segment;
// the shares of the connections, of the open-loop rate and of -n sum
// exactly to what the command asks for, so `netdoctor merge` of the
// workers' results is the load asked for.
type Segment struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

func (s Segment) String() string { return strconv.Itoa(s.Index) + "/" + strconv.Itoa(s.Count) }

// MaxSegments bounds N: more workers than this is a typo, and the merge
// reads every worker's histogram.
const MaxSegments = 10000

// ParseSegment parses "i/N" (1 <= i <= N). base is what the first
// worker's i is: 1 on a command line, 0 where i is Kubernetes'
// JOB_COMPLETION_INDEX.
func ParseSegment(s string, base int) (Segment, error) {
	a, b, ok := strings.Cut(s, "/")
	i, err1 := strconv.Atoi(a)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil {
		return Segment{}, fmt.Errorf("segment %q: want i/N, e.g. 2/4", s)
	}
	i += 1 - base
	if n < 1 || n > MaxSegments || i < 1 || i > n {
		return Segment{}, fmt.Errorf("segment %q: want 1 <= i <= N <= %d (i counted from %d)", s, MaxSegments, base)
	}
	return Segment{Index: i, Count: n}, nil
}

// shareInt is worker s's share of n: the integer part split evenly, the
// remainder one each to the first workers. The shares sum to n.
func (s Segment) shareInt(n int64) int64 {
	q, r := n/int64(s.Count), n%int64(s.Count)
	if int64(s.Index) <= r {
		q++
	}
	return q
}

// rateUnit is the resolution a rate is split at: thousandths of a
// request per second, counted as integers so that the shares sum to the
// rate exactly.
const rateUnit = 1000

// Share returns o as worker s sends it: its share of the connections
// (and of a ramp's), of -n and of the open-loop rate. Every worker must
// keep at least one connection (and one request, with -n).
func (s Segment) Share(o Options) (Options, error) {
	if s.Count <= 1 {
		return o, nil
	}
	n := int64(s.Count)
	conns := o.Connections
	if o.Ramp != nil {
		conns = o.Ramp.To
	}
	if conns == 0 {
		conns = 10
	}
	if int64(conns) < n {
		return o, fmt.Errorf("%w: %d connections cannot be shared by %d workers: give each at least one (-c)", ErrInvalid, conns, s.Count)
	}
	o.Connections = int(s.shareInt(int64(conns)))
	if r := o.Ramp; r != nil {
		if int64(r.From) < n {
			return o, fmt.Errorf("%w: a ramp from %d connections cannot be shared by %d workers", ErrInvalid, r.From, s.Count)
		}
		o.Ramp = &Ramp{From: int(s.shareInt(int64(r.From))), To: o.Connections, Over: r.Over}
	}
	if o.Requests > 0 {
		if o.Requests < n {
			return o, fmt.Errorf("%w: %d requests cannot be shared by %d workers (-n)", ErrInvalid, o.Requests, s.Count)
		}
		o.Requests = s.shareInt(o.Requests)
	}
	if o.Rate > 0 {
		milli := int64(math.Round(o.Rate * rateUnit))
		if milli < n {
			return o, fmt.Errorf("%w: a rate of %g req/s cannot be shared by %d workers (-R)", ErrInvalid, o.Rate, s.Count)
		}
		o.Rate = float64(s.shareInt(milli)) / rateUnit
	}
	seg := s
	o.Segment = &seg
	return o, nil
}

// StartSkew bounds --start-at: a time more than this in the past is a
// worker started too late to be one of the others (its first requests
// would not overlap theirs), and more than MaxStartAhead ahead a typo.
const (
	StartSkew     = time.Second
	MaxStartAhead = time.Hour
)

// CheckStartAt refuses a start time a worker cannot keep: more than
// StartSkew ago, or more than MaxStartAhead ahead of now.
func CheckStartAt(at, now time.Time) error {
	switch d := at.Sub(now); {
	case d < -StartSkew:
		return fmt.Errorf("start time %s is %s in the past (more than %s): this worker started too late to start with the others", at.UTC().Format(time.RFC3339Nano), (-d).Round(time.Millisecond), StartSkew)
	case d > MaxStartAhead:
		return fmt.Errorf("start time %s is %s ahead (more than %s)", at.UTC().Format(time.RFC3339Nano), d.Round(time.Second), MaxStartAhead)
	}
	return nil
}
