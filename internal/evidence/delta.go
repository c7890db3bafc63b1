package evidence

import (
	"strings"
	"time"
)

// Window is the change between two snapshots of one bundle.
type Window struct {
	First, Last *Snapshot
}

// Window returns the span from the first to the last snapshot, or false
// when the bundle has fewer than two.
func (b *Bundle) Window() (Window, bool) {
	if len(b.Snapshots) < 2 {
		return Window{}, false
	}
	return Window{First: &b.Snapshots[0], Last: &b.Snapshots[len(b.Snapshots)-1]}, true
}

// Duration is the time between the two snapshots.
func (w Window) Duration() time.Duration { return w.Last.Time.Sub(w.First.Time) }

// Counter returns how much a counter rose in the window, named either
// way (CounterKey: "TcpExt.ListenOverflows" or nstat's
// "TcpExtListenOverflows"). ok is false when either snapshot lacks it; a
// counter that went down (the namespace was recreated, a counter reset)
// counts as 0.
func (w Window) Counter(name string) (d uint64, ok bool) {
	name = CounterKey(name)
	a, ok1 := w.First.Counters[name]
	b, ok2 := w.Last.Counters[name]
	if !ok1 || !ok2 {
		return 0, false
	}
	if b < a {
		return 0, true
	}
	return b - a, true
}

// Rate is Counter per second.
func (w Window) Rate(name string) float64 {
	d, _ := w.Counter(name)
	s := w.Duration().Seconds()
	if s <= 0 {
		return 0
	}
	return float64(d) / s
}

// SourceRate is the per-second rise of what an evidence item names as its
// source: a counter ("TcpExt.ListenOverflows") or a conntrack statistic
// ("conntrack.drop"), which live in different parts of a snapshot.
func (w Window) SourceRate(source string) float64 {
	st, ok := strings.CutPrefix(source, "conntrack.")
	if !ok {
		return w.Rate(source)
	}
	s := w.Duration().Seconds()
	if s <= 0 {
		return 0
	}
	return float64(w.ConntrackStat(st)) / s
}

// ConntrackStat returns the rise of a conntrack statistic ("drop").
func (w Window) ConntrackStat(name string) uint64 {
	if w.First.Conntrack == nil || w.Last.Conntrack == nil {
		return 0
	}
	a, b := w.First.Conntrack.Stats[name], w.Last.Conntrack.Stats[name]
	if b < a {
		return 0
	}
	return b - a
}

// Kmsg returns every kernel message in the bundle. The reader starts at
// the end of the log when collection begins, so all of them were written
// during the bundle.
func (b *Bundle) Kmsg() []KernelMsg {
	var out []KernelMsg
	for i := range b.Snapshots {
		out = append(out, b.Snapshots[i].Kmsg...)
	}
	return out
}

// From returns the part of the bundle from t on: from the last snapshot
// taken at or before t to the end, so that every counter delta over it
// happened after t. A run takes it from the load's start: its rules see
// the load and the tail, not the quiet baseline before. nil stays nil.
func (b *Bundle) From(t time.Time) *Bundle {
	if b == nil {
		return nil
	}
	from := 0
	for i, s := range b.Snapshots {
		if !s.Time.After(t) {
			from = i
		}
	}
	w := *b
	w.Snapshots = b.Snapshots[from:]
	return &w
}

// Until returns the snapshots taken at or before t.
func (b *Bundle) Until(t time.Time) *Bundle {
	w := *b
	w.Snapshots = nil
	for _, s := range b.Snapshots {
		if !s.Time.After(t) {
			w.Snapshots = append(w.Snapshots, s)
		}
	}
	return &w
}

// RateAt is the per-second rise of a source (a counter, or a conntrack
// statistic as "conntrack.drop") between the two snapshots around t; 0
// outside the bundle.
func (b *Bundle) RateAt(source string, t time.Time) float64 {
	for i := 1; i < len(b.Snapshots); i++ {
		if b.Snapshots[i].Time.Before(t) {
			continue
		}
		return Window{First: &b.Snapshots[i-1], Last: &b.Snapshots[i]}.SourceRate(source)
	}
	return 0
}
