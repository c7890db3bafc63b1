package capacity

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/run"
)

// live drives real loads: load.Run, or the Loader, for the steps,
// run.Run for the diagnosis.
type live struct{ steps Loader }

func (live) now() time.Time { return time.Now() }

func (l live) load(ctx context.Context, o load.Options, collapse func(load.Second) bool) (outcome, error) {
	o.ScriptOut = nil // a script's prints, once a step, would bury the report
	if l.steps != nil {
		// Workers report their seconds when they end, not as they go:
		// a collapse is seen in the step's result, not cut short.
		res, err := l.steps.Load(ctx, o)
		if err != nil {
			return outcome{}, err
		}
		return outcomeOf(res, false), nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var collapsed atomic.Bool
	if collapse != nil {
		o.OnSecond = func(sec load.Second) {
			if collapse(sec) {
				collapsed.Store(true)
				cancel()
			}
		}
	}
	res, err := load.Run(ctx, o)
	if err != nil {
		return outcome{}, err
	}
	return outcomeOf(res, collapsed.Load()), nil
}

func (live) diagnose(ctx context.Context, o run.Options) (*run.Result, error) {
	o.Load.ScriptOut = nil
	return run.Run(ctx, o)
}

// settleEvery is how often settle asks again.
const settleEvery = 100 * time.Millisecond

// settle sends one request at a time, each as the steps send theirs,
// until one is answered successfully within bound, or deadline.
func (live) settle(ctx context.Context, o load.Options, bound time.Duration, deadline time.Time) {
	o.Rate, o.Grow, o.Ramp, o.Measure, o.OnStart, o.OnSecond, o.ScriptOut = 0, false, nil, 0, nil, nil, nil
	o.Requests, o.Connections, o.Threads = 1, 1, 1
	for {
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return
		}
		o.Duration, o.Timeout = left, min(left, max(o.Timeout, bound))
		res, err := load.Run(ctx, o)
		if err != nil || res.Good() == 1 && res.Latency.Max <= bound {
			return
		}
		t := time.NewTimer(min(settleEvery, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
