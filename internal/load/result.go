package load

import (
	"encoding/json"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Errors counts failed requests in wrk's classes.
type Errors struct {
	// Connect: the connection could not be opened (refused, unreachable,
	// no local port, no file descriptor).
	Connect uint64 `json:"connect"`
	// Read: reading the response failed (reset, closed mid-response,
	// malformed response).
	Read uint64 `json:"read"`
	// Write: sending the request failed.
	Write uint64 `json:"write"`
	// Timeout: no complete response within the timeout.
	Timeout uint64 `json:"timeout"`
}

// Total is the sum of all classes.
func (e Errors) Total() uint64 { return e.Connect + e.Read + e.Write + e.Timeout }

func (e *Errors) add(o Errors) {
	e.Connect += o.Connect
	e.Read += o.Read
	e.Write += o.Write
	e.Timeout += o.Timeout
}

// Second is one second of the timeline.
type Second struct {
	// Index counts seconds from the start of the run, from 0.
	Index int       `json:"second"`
	Start time.Time `json:"start"`
	// Length is 1 s except for the last, partial second of a run.
	Length time.Duration `json:"length_ns"`
	// Requests completed with a response in this second.
	Requests uint64 `json:"requests"`
	Bytes    uint64 `json:"bytes"`
	Errors   Errors `json:"errors"`
	// Status counts responses by class: Status[2] is 2xx.
	Status [6]uint64 `json:"status_classes"`
	// P50 and P99 of the latencies of this second's responses.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// OpenConns is the number of connections open at the end of it.
	OpenConns int `json:"open_conns"`
	// Histogram is this second's responses' latencies, kept by a worker
	// of a distributed load (Options.Segment) so that the merge makes
	// each second's percentiles from the workers' counts.
	Histogram *Hist `json:"histogram,omitempty"`
}

// Latency summarises the latency distribution of a run.
type Latency struct {
	Min   time.Duration `json:"min_ns"`
	Mean  time.Duration `json:"mean_ns"`
	Stdev time.Duration `json:"stdev_ns"`
	Max   time.Duration `json:"max_ns"`
	P50   time.Duration `json:"p50_ns"`
	P75   time.Duration `json:"p75_ns"`
	P90   time.Duration `json:"p90_ns"`
	P99   time.Duration `json:"p99_ns"`
	P999  time.Duration `json:"p999_ns"`
}

// Self is what the load generator measured about itself.
type Self struct {
	// CPUSeconds is user+system CPU time of the whole process during the
	// run.
	CPUSeconds float64 `json:"cpu_seconds"`
	// CPUPerRequest is CPUSeconds per completed request.
	CPUPerRequest time.Duration `json:"cpu_per_request_ns"`
	// ThreadBusy is, per event-loop thread, the fraction of the run it
	// spent on CPU (1.0: never waited for the network).
	ThreadBusy []float64 `json:"thread_busy"`
}

// Result is the outcome of a run.
type Result struct {
	URL         string `json:"url"`
	Method      string `json:"method"`
	Connections int    `json:"connections"`
	Threads     int    `json:"threads"`
	KeepAlive   bool   `json:"keepalive"`
	// Engine is the event loop that ran (Options.Engine): "epoll",
	// "io_uring", or "goroutines" where there is no epoll. Empty in
	// results written before it.
	Engine    Engine        `json:"engine,omitempty"`
	Rate      float64       `json:"target_rate,omitempty"`
	Elapsed   time.Duration `json:"duration_ns"`
	DurationS float64       `json:"duration_s"`

	// Requests counts completed responses, whatever their status.
	Requests    uint64  `json:"requests"`
	Bytes       uint64  `json:"bytes"`
	RPS         float64 `json:"rps"`
	BytesPerSec float64 `json:"bytes_per_sec"`
	Latency     Latency `json:"latency"`
	// LatencyAll is the latency of every request, answered or failed:
	// a failed one counts at the time it failed or timed out, and in
	// open loop one never sent (Unsent) at its age when the run ended.
	// It is what the service's users waited, where Latency is the
	// answered requests' alone: a run whose slow requests time out has
	// a fast Latency. Nil in results written before it.
	LatencyAll *Latency `json:"latency_all,omitempty"`
	// Percentiles holds the distribution for --latency: percentile → ns.
	Percentiles []Percentile `json:"percentiles"`
	Errors      Errors       `json:"errors"`
	// ErrorCauses counts errors by cause within the classes: "refused",
	// "reset", "closed", "malformed", "no-local-port", "fd-limit"…
	ErrorCauses map[string]uint64 `json:"error_causes,omitempty"`
	// Status counts responses by class, "2xx" … "5xx". In JSON
	// status_classes: a report's "status" is its verdict's word (before
	// version 2 of the reports, this was "status").
	Status map[string]uint64 `json:"status_classes"`
	// Queued counts the open-loop requests that found every connection
	// busy when they were due and waited in the load generator for one;
	// Unsent those still waiting when the run ended (counted neither as
	// responses nor as errors).
	Queued uint64 `json:"queued,omitempty"`
	Unsent uint64 `json:"unsent,omitempty"`
	// Measured is the part of the run after Options.Measure, when set.
	Measured *Window `json:"measured,omitempty"`
	// ConnectionsOpened counts TCP connections established.
	ConnectionsOpened uint64   `json:"connections_opened"`
	Timeline          []Second `json:"timeline"`
	Self              Self     `json:"self"`
	// Saturated is true when the numbers are limited by the load
	// generator, not the server; SaturatedBy says why. The JSON report
	// also carries them as a load-generator-saturated finding.
	Saturated   bool     `json:"load_generator_saturated"`
	SaturatedBy []string `json:"saturated_by,omitempty"`
	// Start is the wall-clock time the run started (its first second's).
	Start time.Time `json:"start,omitzero"`
	// Segment is the worker's share this result is, in a distributed
	// load (--segment); Workers, in a merged result, each worker's.
	Segment *Segment `json:"segment,omitempty"`
	Workers []Worker `json:"workers,omitempty"`
	// Histogram and HistogramAll are the latencies of Latency and
	// LatencyAll as HDR counts, written by `load --json` (KeepHistograms)
	// for `netdoctor merge`; nil elsewhere.
	Histogram    *Hist `json:"histogram,omitempty"`
	HistogramAll *Hist `json:"histogram_all,omitempty"`
	// Interrupted is true when the run was stopped early (Ctrl-C).
	Interrupted bool     `json:"interrupted"`
	Notes       []string `json:"notes,omitempty"`

	// LatencySpread is the latency distribution as wrk's "Thread Stats"
	// table shows it, in microseconds. ReqPerSec is wrk's "Req/Sec" row:
	// each thread's responses per second, sampled every 100 ms until the
	// duration ends (see rateSampler). Neither is in the JSON report,
	// which keeps its own fields; the text report prints them.
	LatencySpread Spread `json:"-"`
	ReqPerSec     Spread `json:"-"`
	// script is the run's Lua states, for ScriptDone.
	script *scriptRun
	// hist and histAll are Latency's and LatencyAll's histograms; raw
	// every response's latency in µs, with Options.RawLatencies.
	hist, histAll *hdrhistogram.Histogram
	raw           []int64
}

// KeepHistograms puts the run's latency histograms into the result's
// JSON (Histogram, HistogramAll), as a worker's result carries them.
func (r *Result) KeepHistograms() {
	if r.hist != nil {
		r.Histogram = newHist(r.hist)
	}
	if r.histAll != nil && r.histAll.TotalCount() > 0 {
		r.HistogramAll = newHist(r.histAll)
	}
	if m := r.Measured; m != nil && m.all != nil && m.all.TotalCount() > 0 {
		m.HistogramAll = newHist(m.all)
	}
}

// RawLatencies is every response's latency in microseconds, as recorded
// in the histogram, when Options.RawLatencies asked for them.
func (r *Result) RawLatencies() []int64 { return r.raw }

// Spread sums up samples as a row of wrk's "Thread Stats" table does.
type Spread struct {
	Samples     int64
	Mean, Stdev float64
	Max         float64
	// WithinStdev is the percentage of samples within one standard
	// deviation of the mean, wrk's "+/- Stdev".
	WithinStdev float64
}

// Percentile is one point of the latency distribution.
type Percentile struct {
	Percentile float64       `json:"percentile"`
	Latency    time.Duration `json:"latency_ns"`
}

// Window is the measured part of a run (Options.Measure): what ended
// from From on, over Seconds.
type Window struct {
	From    time.Duration `json:"from_ns"`
	Seconds float64       `json:"seconds"`
	// Requests counts the responses, Status them by class.
	Requests uint64            `json:"requests"`
	Status   map[string]uint64 `json:"status_classes"`
	Errors   Errors            `json:"errors"`
	Unsent   uint64            `json:"unsent,omitempty"`
	// Latency is the responses'; LatencyAll every request's, as
	// Result.LatencyAll.
	Latency    Latency `json:"latency"`
	LatencyAll Latency `json:"latency_all"`
	// HistogramAll is every request's latency in the window as counts
	// (KeepHistograms), so that the windows of a distributed load's
	// workers merge (capacity --workers judges each step on that).
	HistogramAll *Hist `json:"histogram_all,omitempty"`
	all          *hdrhistogram.Histogram
}

// Percentile is the latency of every request in the window at
// percentile p (0 < p <= 100), answered or failed; zero when nothing
// ended in it or the window was read back from JSON.
func (w *Window) Percentile(p float64) time.Duration {
	if w.all == nil || w.all.TotalCount() == 0 {
		return 0
	}
	return us(w.all.ValueAtPercentile(p))
}

// Ended counts the requests that ended in the window: answered, failed,
// or never sent.
func (w *Window) Ended() uint64 { return w.Requests + w.Errors.Total() + w.Unsent }

// Good counts the window's successful responses: 2xx and 3xx.
func (w *Window) Good() uint64 { return w.Status["2xx"] + w.Status["3xx"] }

// Good counts the successful responses: 2xx and 3xx.
func (r *Result) Good() uint64 { return r.Status["2xx"] + r.Status["3xx"] }

// Goodput is the successful responses per second.
func (r *Result) Goodput() float64 {
	if r.DurationS <= 0 {
		return 0
	}
	return float64(r.Good()) / r.DurationS
}

// SuccessShare is the share of the requests that ended (answered, failed
// or, in open loop, never sent) that succeeded; 0 when none ended.
func (r *Result) SuccessShare() float64 {
	n := r.Requests + r.Errors.Total() + r.Unsent
	if n == 0 {
		return 0
	}
	return float64(r.Good()) / float64(n)
}

// secondJSON is Second as JSON, with the name of version 1 read too.
type secondJSON Second

// UnmarshalJSON reads a second, and its status classes under the name
// reports and bundles used before version 2 ("status").
func (s *Second) UnmarshalJSON(b []byte) error {
	var v struct {
		secondJSON
		Old *[6]uint64 `json:"status"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Second(v.secondJSON)
	if v.Old != nil && s.Status == ([6]uint64{}) {
		s.Status = *v.Old
	}
	return nil
}

// StatusV1 reads the status classes of a result written before version
// 2 of the reports and bundles, when they were "status": raw is the
// result's JSON object (or a load report's, where the result is at the
// top level).
func StatusV1(raw []byte) map[string]uint64 {
	var old struct {
		Status map[string]uint64 `json:"status"`
	}
	if json.Unmarshal(raw, &old) != nil {
		return nil
	}
	return old.Status
}
