package load

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/netdoctor/netdoctor/internal/pace"
)

// ErrResolve reports a host name that did not resolve.
var ErrResolve = errors.New("cannot resolve host")

// engine is the state shared by the threads of one run.
type engine struct {
	opts    Options
	t       target
	addr    net.IP
	req     []byte
	head    bool
	start   time.Time
	end     time.Time // zero: no time limit
	stop    atomic.Bool
	issued  atomic.Int64 // requests attempted, for Options.Requests
	settled atomic.Int64 // requests finished (response or error)
	threads []*threadStats
	done    chan struct{} // closed when the budget is spent
	once    sync.Once
	// unit is the requests one write carries: a script's pipeline.
	unit   int64
	script *scriptRun
	runErr atomic.Pointer[error] // the first script error of the run
	hist   *hdrhistogram.Histogram
	// engine is the event loop that runs (choose); notes what the run
	// should say about it.
	engine  Engine
	notesMu sync.Mutex
	notes   []string
}

// fail stops the run for a script error; Run returns the first.
func (e *engine) fail(err error) {
	e.runErr.CompareAndSwap(nil, &err)
	e.stop.Store(true)
}

// take reserves one request from the -n budget. It returns false when the
// budget is spent.
func (e *engine) take() bool {
	if e.opts.Requests <= 0 {
		return true
	}
	return e.issued.Add(e.unit)-e.unit < e.opts.Requests
}

// settle marks one reserved request finished.
func (e *engine) settle() {
	if e.opts.Requests > 0 && e.settled.Add(e.unit) >= e.opts.Requests {
		e.once.Do(func() { close(e.done) })
	}
}

// targetConns is the number of connections wanted at elapsed time d.
func (e *engine) targetConns(d time.Duration) int {
	r := e.opts.Ramp
	if r == nil {
		return e.opts.Connections
	}
	if d >= r.Over {
		return r.To
	}
	// Step once a second, as JMeter's ramp-up adds users.
	steps := int(r.Over / time.Second)
	if steps < 1 {
		return r.To
	}
	step := int(d / time.Second)
	return r.From + (r.To-r.From)*step/steps
}

// Run sends load as the options say and returns the result. It stops at
// the duration, after Requests responses, or when ctx is cancelled, in
// which case the result is marked Interrupted and still returned.
func Run(ctx context.Context, o Options) (*Result, error) {
	e, err := prepare(ctx, o)
	if err != nil {
		return nil, err
	}
	return e.run(ctx)
}

func prepare(ctx context.Context, o Options) (*engine, error) {
	t, err := parseTarget(o.URL)
	if err != nil {
		return nil, err
	}
	if err := defaults(&o); err != nil {
		return nil, err
	}
	e := &engine{opts: o, t: t, done: make(chan struct{}), unit: 1}
	eng, note, err := choose(o.Engine)
	if err != nil {
		return nil, err
	}
	e.engine = eng
	if note != "" {
		e.notes = append(e.notes, note)
	}
	e.head = o.Method == "HEAD"
	if o.Script == nil {
		if e.req, err = buildRequest(o, t); err != nil {
			return nil, err
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIP(rctx, "ip", t.hostname)
	if err != nil || len(ips) == 0 {
		return nil, fmt.Errorf("%w %q: %v", ErrResolve, t.hostname, err)
	}
	e.addr = ips[0]
	for _, ip := range ips { // prefer IPv4 as wrk does
		if ip.To4() != nil {
			e.addr = ip
			break
		}
	}
	if o.Script != nil {
		if err := e.startScript(o.ScriptOut); err != nil {
			return nil, err
		}
		e.head = bytes.HasPrefix(e.req, []byte("HEAD "))
	}
	return e, nil
}

func defaults(o *Options) error {
	if o.Method == "" {
		o.Method = "GET"
	}
	if o.Ramp != nil {
		o.Connections = o.Ramp.To
	}
	if o.Connections == 0 {
		o.Connections = 10
	}
	if o.Threads == 0 {
		o.Threads = 2
	}
	if o.Timeout == 0 {
		o.Timeout = 2 * time.Second
	}
	if o.Duration == 0 && o.Requests == 0 {
		o.Duration = 10 * time.Second
	}
	switch {
	case o.Connections < 1:
		return fmt.Errorf("%w: connections must be at least 1, got %d", ErrInvalid, o.Connections)
	case o.Threads < 1:
		return fmt.Errorf("%w: threads must be at least 1, got %d", ErrInvalid, o.Threads)
	case o.Duration < 0 || o.Requests < 0 || o.Rate < 0 || o.Timeout < 0:
		return fmt.Errorf("%w: duration, requests, rate and timeout must not be negative", ErrInvalid)
	case strings.ContainsAny(o.Method, " \r\n"):
		return fmt.Errorf("%w: method %q", ErrInvalid, o.Method)
	}
	o.Threads = min(o.Threads, o.Connections)
	return nil
}

// buildRequest renders the request once; every send reuses the bytes.
func buildRequest(o Options, t target) ([]byte, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", o.Method, t.path)
	has := map[string]bool{}
	for _, h := range o.Header {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" || strings.ContainsAny(h, "\r\n") {
			return nil, fmt.Errorf("%w: header %q: want 'Name: value'", ErrInvalid, h)
		}
		has[strings.ToLower(strings.TrimSpace(name))] = true
		fmt.Fprintf(&b, "%s: %s\r\n", strings.TrimSpace(name), strings.TrimSpace(value))
	}
	if !has["host"] {
		fmt.Fprintf(&b, "Host: %s\r\n", t.host)
	}
	if !has["user-agent"] {
		b.WriteString("User-Agent: netdoctor\r\n")
	}
	if o.NoKeepAlive && !has["connection"] {
		b.WriteString("Connection: close\r\n")
	}
	if len(o.Body) > 0 && !has["content-length"] {
		b.WriteString("Content-Length: " + strconv.Itoa(len(o.Body)) + "\r\n")
	}
	b.WriteString("\r\n")
	return append([]byte(b.String()), o.Body...), nil
}

func (e *engine) run(ctx context.Context) (*Result, error) {
	o := e.opts
	res := &Result{URL: o.URL, Method: o.Method, Connections: o.Connections, Threads: o.Threads,
		KeepAlive: !o.NoKeepAlive, Rate: o.Rate, Engine: e.engine}
	if n, note := raiseNofile(o.Connections); note != "" {
		res.Notes = append(res.Notes, note)
		if n < o.Connections {
			res.Saturated = true
			res.SaturatedBy = append(res.SaturatedBy, note)
			e.opts.Connections = n
			o.Connections = n
			if e.opts.Ramp != nil {
				e.opts.Ramp.To = min(e.opts.Ramp.To, n)
				e.opts.Ramp.From = min(e.opts.Ramp.From, n)
			}
		}
	}
	from := time.Duration(-1)
	if o.Measure > 0 {
		from = o.Measure
	}
	for range o.Threads {
		t := newThreadStats(from)
		if o.RawLatencies {
			t.raw = make([]int64, 0, 1024)
		}
		e.threads = append(e.threads, t)
	}
	// Each event loop keeps its P through epoll_wait; leave one for the
	// timeline, timers and whatever else the program runs meanwhile.
	if procs := runtime.GOMAXPROCS(0); procs < o.Threads+1 {
		defer runtime.GOMAXPROCS(procs)
		runtime.GOMAXPROCS(o.Threads + 1)
	}
	// A worker of a distributed load starts with the others, and only
	// then says so: a run resumes its sampling when the load begins.
	if !o.StartAt.IsZero() && !pace.Until(ctx, o.StartAt) {
		return nil, ctx.Err()
	}
	if o.OnStart != nil {
		o.OnStart()
	}
	cpu0 := processCPU()
	e.start = time.Now()
	if o.Duration > 0 {
		e.end = e.start.Add(o.Duration)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	go func() {
		var deadline <-chan time.Time
		if !e.end.IsZero() {
			t := time.NewTimer(time.Until(e.end))
			defer t.Stop()
			deadline = t.C
		}
		select {
		case <-runCtx.Done():
		case <-deadline:
		case <-e.done:
		}
		e.stop.Store(true)
		close(stopped)
	}()
	agg := newAggregator(e)
	aggDone := make(chan struct{})
	go func() { agg.loop(runCtx); close(aggDone) }()
	rates := newRateSampler(e.threads, e.start)
	ratesDone := make(chan struct{})
	go func() { rates.loop(stopped); close(ratesDone) }()

	busy := make([]float64, o.Threads)
	var wg sync.WaitGroup
	for i := range o.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			busy[i] = e.runThread(i)
		}()
	}
	wg.Wait()
	elapsed := time.Since(e.start)
	cancel()
	<-aggDone
	<-ratesDone
	agg.flush(elapsed)
	res.Interrupted = ctx.Err() != nil
	res.Notes = append(res.Notes, e.notes...)
	res.ReqPerSec = spreadOf(rates.hist)
	e.fill(res, elapsed, busy, processCPU()-cpu0, agg)
	if sr := e.script; sr != nil {
		if err := e.runErr.Load(); err != nil {
			sr.close()
			return nil, *err
		}
		sr.latency, sr.rates = e.hist, rates.hist
		res.script = sr
	}
	return res, nil
}

// fill sums the threads into the result and judges the generator itself.
func (e *engine) fill(res *Result, elapsed time.Duration, busy []float64, cpu float64, agg *aggregator) {
	run := hdrhistogram.New(histMin, histMax, histSig)
	all := hdrhistogram.New(histMin, histMax, histSig)
	var m *Window
	var mrun, mall *hdrhistogram.Histogram
	if o := e.opts.Measure; o > 0 && o < elapsed {
		m = &Window{From: o, Seconds: (elapsed - o).Seconds(), Status: map[string]uint64{}}
		mrun, mall = hdrhistogram.New(histMin, histMax, histSig), hdrhistogram.New(histMin, histMax, histSig)
	}
	res.Status = map[string]uint64{}
	res.ErrorCauses = map[string]uint64{}
	for _, t := range e.threads {
		t.mu.Lock()
		run.Merge(t.run)
		all.Merge(t.all)
		res.Requests += t.total.requests
		res.Bytes += t.total.bytes
		res.Errors.add(t.total.errors)
		res.Queued += t.queued
		res.Unsent += t.total.unsent
		if m != nil {
			mrun.Merge(t.mrun)
			mall.Merge(t.mall)
			m.Requests += t.measured.requests
			m.Errors.add(t.measured.errors)
			m.Unsent += t.measured.unsent
			for c := 1; c <= 5; c++ {
				if n := t.measured.status[c]; n > 0 {
					m.Status[strconv.Itoa(c)+"xx"] += n
				}
			}
		}
		for c := 1; c <= 5; c++ {
			if n := t.total.status[c]; n > 0 {
				res.Status[strconv.Itoa(c)+"xx"] += n
			}
		}
		for k, v := range t.causes {
			res.ErrorCauses[k] += v
		}
		res.ConnectionsOpened += t.opened
		res.raw = append(res.raw, t.raw...)
		t.mu.Unlock()
	}
	res.Elapsed = elapsed
	res.DurationS = elapsed.Seconds()
	if s := elapsed.Seconds(); s > 0 {
		res.RPS = float64(res.Requests) / s
		res.BytesPerSec = float64(res.Bytes) / s
	}
	e.hist = run
	res.hist, res.histAll = run, all
	res.Start = e.start
	res.Segment = e.opts.Segment
	res.Latency = latencyOf(run)
	if all.TotalCount() > 0 {
		la := latencyOf(all)
		res.LatencyAll = &la
	}
	if m != nil {
		m.Latency, m.LatencyAll, m.all = latencyOf(mrun), latencyOf(mall), mall
		res.Measured = m
	}
	res.LatencySpread = spreadOf(run)
	for _, p := range []float64{50, 75, 90, 99, 99.9, 99.99, 100} {
		res.Percentiles = append(res.Percentiles, Percentile{p, us(run.ValueAtPercentile(p))})
	}
	res.Timeline = agg.timeline
	res.Self.CPUSeconds = cpu
	res.Self.ThreadBusy = busy
	if res.Requests > 0 {
		res.Self.CPUPerRequest = time.Duration(cpu / float64(res.Requests) * 1e9)
	}
	e.judge(res)
}

func us(v int64) time.Duration { return time.Duration(v) * time.Microsecond }

func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Min: us(h.Min()), Max: us(h.Max()),
		Mean:  time.Duration(h.Mean() * float64(time.Microsecond)),
		Stdev: time.Duration(h.StdDev() * float64(time.Microsecond)),
		P50:   us(h.ValueAtPercentile(50)), P75: us(h.ValueAtPercentile(75)),
		P90: us(h.ValueAtPercentile(90)), P99: us(h.ValueAtPercentile(99)),
		P999: us(h.ValueAtPercentile(99.9)),
	}
}

// busyLimit is the share of a thread's time on CPU above which it, not the
// server, may be what limits the numbers.
const busyLimit = 0.9

// judge decides whether the load generator limited the result.
func (e *engine) judge(res *Result) {
	add := func(format string, args ...any) {
		res.Saturated = true
		res.SaturatedBy = append(res.SaturatedBy, fmt.Sprintf(format, args...))
	}
	for i, b := range res.Self.ThreadBusy {
		if b >= busyLimit {
			add("thread %d was on CPU %.0f%% of the run: the server may be faster than measured (add -t threads or CPUs)", i, 100*b)
		}
	}
	if n := res.ErrorCauses["fd-limit"]; n > 0 {
		add("%d connections failed for lack of file descriptors in the load generator (RLIMIT_NOFILE)", n)
	}
	if n := res.ErrorCauses["no-local-port"]; n > 0 {
		add("%d connections failed for lack of a local port on the load generator's host (ip_local_port_range, TIME_WAIT)", n)
	}
	if e.opts.Rate > 0 && res.Elapsed > 2*time.Second {
		if got := res.RPS; got < 0.95*e.opts.Rate && anyBusy(res.Self.ThreadBusy) {
			add("sent %.0f req/s of the %.0f asked for while its threads were busy", got, e.opts.Rate)
		}
	}
}

func anyBusy(b []float64) bool {
	for _, v := range b {
		if v >= 0.75 {
			return true
		}
	}
	return false
}
