// Package pace is how netdoctor keeps time while it samples: one ticker
// for every loop that does something each interval (the snapshots of
// check, collect, run and the agent, the servers' samples, the agent's
// dependency bursts, a trace's looks at its connections) and one wait
// (Sleep, Until) for everything that waits for a time or a cancelled
// context, whichever comes first.
//
// A Ticker's ticks fall on a lattice aligned to its start: start,
// start+interval, start+2·interval… A tick whose work overran is not
// made up for by a burst of ticks back to back, which would sample the
// same instant several times: the ticks that fell due meanwhile are
// dropped (Tick.Missed), the next one fires at once, late (Tick.Late),
// and the ones after it are on the lattice again.
package pace

import (
	"context"
	"iter"
	"time"
)

// Ticker paces a loop. It is not safe for concurrent use: one loop
// owns it.
type Ticker struct {
	start    time.Time
	interval time.Duration
	// n is the lattice index of the next tick.
	n int
}

// Tick is one tick of a Ticker.
type Tick struct {
	// N is the tick's place on the lattice: 0 for the first, and the
	// ticks dropped in between count (N of consecutive ticks differs by
	// Missed+1).
	N int
	// Due is when the tick fell due: start + N·interval. At is when it
	// fired.
	Due, At time.Time
	// Missed counts the ticks dropped before this one because the loop
	// was still busy when they fell due.
	Missed int
}

// Late is how long after its time the tick fired: a timer's few
// microseconds when the loop keeps up, up to an interval when the work
// of the tick before overran.
func (t Tick) Late() time.Duration { return t.At.Sub(t.Due) }

// New returns a ticker whose first tick is due now.
func New(interval time.Duration) *Ticker {
	return NewAt(time.Now(), interval)
}

// NewAt returns a ticker whose first tick is due at start.
func NewAt(start time.Time, interval time.Duration) *Ticker {
	if interval <= 0 {
		panic("pace: interval must be positive")
	}
	return &Ticker{start: start, interval: interval}
}

// Due is when the next tick falls due, unless the loop overruns it.
func (t *Ticker) Due() time.Time { return t.at(t.n) }

func (t *Ticker) at(n int) time.Time { return t.start.Add(time.Duration(n) * t.interval) }

// Next waits for the next tick and returns it; false when ctx ended
// first (a tick already due is not given once ctx has ended).
func (t *Ticker) Next(ctx context.Context) (Tick, bool) {
	if !Until(ctx, t.Due()) {
		return Tick{}, false
	}
	return t.fire(time.Now()), true
}

// fire is the tick given at now, which is not before the next tick's
// due time: the latest tick due by now, the ones before it dropped.
func (t *Ticker) fire(now time.Time) Tick {
	n := t.n
	if behind := int(now.Sub(t.start) / t.interval); behind > n {
		n = behind
	}
	tk := Tick{N: n, Due: t.at(n), At: now, Missed: n - t.n}
	t.n = n + 1
	return tk
}

// Every ticks every interval from now until ctx ends: the loop's body
// runs on the caller's goroutine, and breaking out of the loop stops
// it.
func Every(ctx context.Context, interval time.Duration) iter.Seq[Tick] {
	return func(yield func(Tick) bool) {
		t := New(interval)
		for {
			tk, ok := t.Next(ctx)
			if !ok || !yield(tk) {
				return
			}
		}
	}
}

// Sleep waits for d or until ctx ends, and says whether d passed (false:
// ctx ended first).
func Sleep(ctx context.Context, d time.Duration) bool {
	return Until(ctx, time.Now().Add(d))
}

// Until waits until at or until ctx ends, and says whether at came
// (false: ctx ended first). A time already past returns at once, true
// unless ctx has ended.
func Until(ctx context.Context, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return ctx.Err() == nil
	}
}
