package load

import (
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"
)

// Options describe one load run. The zero value of a field means its
// default, as documented on each field.
type Options struct {
	// URL is the target, http:// or https://, IPv4, IPv6 or a name.
	URL string
	// Method is the request method; default GET.
	Method string
	// Header lines "Name: value", added to every request.
	Header []string
	// Body is sent with every request, with a Content-Length.
	Body []byte

	// Connections is the number of connections kept open (or, with
	// KeepAlive false, the number of requests in flight); default 10.
	Connections int
	// Threads is the number of event-loop threads; default 2, at most
	// Connections.
	Threads int
	// Duration bounds the run; default 10 s unless Requests is set. A run
	// with Requests set still stops at Duration if given.
	Duration time.Duration
	// Requests, if > 0, stops the run after exactly this many responses
	// (and errors) have completed.
	Requests int64
	// Rate, if > 0, sends this many requests per second in total,
	// open-loop: each request has an intended send time and its latency
	// is measured from it, so a stalled server shows up as queueing delay
	// (coordinated omission corrected, as wrk2 does).
	Rate float64
	// Grow, with Rate, opens connections as the requests need them, up
	// to Connections, instead of all of them at the start: a request
	// due when every open connection is busy opens one more, as a
	// client's pool grows, and waits in the generator (Result.Queued)
	// only once Connections are open.
	Grow bool
	// Measure, if > 0, is where the measured part of the run begins,
	// after a warm-up: Result.Measured sums up what ended from then on
	// (capacity's steps judge their steady state by it).
	Measure time.Duration
	// Timeout is the longest a request may take before it counts as a
	// timeout error and its connection is closed; default 2 s.
	Timeout time.Duration
	// NoKeepAlive opens a new connection per request and closes it after
	// the response ("Connection: close"); latency then includes connect.
	NoKeepAlive bool
	// Ramp, if set, steps the number of connections from Ramp.From to
	// Ramp.To over Ramp.Over; Connections is then Ramp.To.
	Ramp *Ramp
	// Engine is the event loop: EngineEpoll, EngineIOUring, or
	// EngineAuto (the zero value too): io_uring where this host allows
	// it, epoll where it is disabled, refused (a seccomp filter) or too
	// old, the reason in Result.Notes. Result.Engine says which ran.
	Engine Engine

	// Script, if set, is a wrk Lua script: it sets the requests (Method,
	// Header and Body become wrk.method, wrk.headers and wrk.body), may
	// see the responses, and its done runs in Result.ScriptDone. It is
	// compiled code, not data: Options as JSON (the lab's jobs) carry
	// none, nor the writer and hooks below.
	Script *Script `json:"-"`
	// ScriptArgs are init's args after args[0], the URL.
	ScriptArgs []string
	// ScriptOut receives the script's print and io.write; nil discards.
	ScriptOut io.Writer `json:"-"`

	// Segment, if set, is this worker's share of a load that several
	// processes send together (Segment.Share made these options); the
	// result says it, and keeps each second's histogram for the merge.
	Segment *Segment `json:"segment,omitempty"`
	// StartAt, if set, is the wall-clock time the run starts at: every
	// worker of a distributed load waits until it, so that their
	// first requests go out together and their seconds align.
	StartAt time.Time `json:"-"`
	// RawLatencies keeps every response's latency (Result.RawLatencies),
	// for tests that check the histograms against them.
	RawLatencies bool `json:"-"`

	// OnStart, if set, is called once the options are valid and the host
	// resolved, just before the first connection.
	OnStart func() `json:"-"`
	// OnSecond, if set, receives each second of the timeline as soon as it
	// is complete, on a goroutine of its own; it must return quickly.
	OnSecond func(Second) `json:"-"`
}

// Engine names a load engine (--engine).
type Engine string

// The engines: Run picks for EngineAuto.
const (
	EngineAuto    Engine = "auto"
	EngineEpoll   Engine = "epoll"
	EngineIOUring Engine = "io_uring"
	// EngineGoroutines is where there is no epoll (not Linux): a
	// goroutine per connection. Never asked for; only reported.
	EngineGoroutines Engine = "goroutines"
)

// ParseEngine reads --engine's value.
func ParseEngine(s string) (Engine, error) {
	switch e := Engine(s); e {
	case EngineAuto, EngineEpoll, EngineIOUring:
		return e, nil
	case "":
		return EngineAuto, nil
	}
	return "", fmt.Errorf("%w: engine %q: want epoll, io_uring or auto", ErrInvalid, s)
}

// EngineFor says which engine a run asked for asked would use on this
// host, and why when that is not the one asked for (EngineAuto falling
// back); an engine this host cannot run is ErrEngine.
func EngineFor(asked Engine) (Engine, string, error) { return choose(asked) }

// ErrEngine is an engine asked for that this host cannot run: options
// this host cannot run, so ErrInvalid too.
var ErrEngine = fmt.Errorf("%w: load engine unavailable", ErrInvalid)

// Ramp is --ramp FROM:TO:DURATION.
type Ramp struct {
	From, To int
	Over     time.Duration
}

// ParseRamp parses "FROM:TO:DURATION", e.g. "10:1000:30s".
func ParseRamp(s string) (*Ramp, error) {
	f := strings.Split(s, ":")
	if len(f) != 3 {
		return nil, fmt.Errorf("ramp %q: want FROM:TO:DURATION, e.g. 10:1000:30s", s)
	}
	var r Ramp
	if _, err := fmt.Sscanf(f[0]+" "+f[1], "%d %d", &r.From, &r.To); err != nil || r.From < 1 || r.To < r.From {
		return nil, fmt.Errorf("ramp %q: FROM and TO must be connection counts with 1 <= FROM <= TO", s)
	}
	d, err := time.ParseDuration(f[2])
	if err != nil || d <= 0 {
		return nil, fmt.Errorf("ramp %q: DURATION must be positive with a unit, e.g. 30s", s)
	}
	r.Over = d
	return &r, nil
}

// ErrInvalid marks options that cannot run.
var ErrInvalid = errors.New("invalid load options")

// target is the parsed URL.
type target struct {
	scheme   string // "http" or "https"
	host     string // for the Host header, with port if not default
	hostname string // for resolving and TLS SNI
	port     string
	path     string // request-target, with query
}

func parseTarget(raw string) (target, error) {
	if !strings.Contains(raw, "://") {
		return target{}, fmt.Errorf("%w: URL %q has no scheme: use http:// or https://", ErrInvalid, raw)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("%w: URL %q: %v", ErrInvalid, raw, err)
	}
	var t target
	switch u.Scheme {
	case "http", "https":
		t.scheme = u.Scheme
	case "":
		return target{}, fmt.Errorf("%w: URL %q has no scheme: use http:// or https://", ErrInvalid, raw)
	default:
		return target{}, fmt.Errorf("%w: URL %q: scheme %q not supported, use http or https", ErrInvalid, raw, u.Scheme)
	}
	if u.Hostname() == "" {
		return target{}, fmt.Errorf("%w: URL %q has no host", ErrInvalid, raw)
	}
	if u.User != nil {
		return target{}, fmt.Errorf("%w: URL %q: credentials in URLs are not supported, use -H 'Authorization: ...'", ErrInvalid, raw)
	}
	t.hostname = u.Hostname()
	t.port = u.Port()
	if t.port == "" {
		t.port = map[string]string{"http": "80", "https": "443"}[t.scheme]
	}
	t.host = u.Host
	t.path = u.RequestURI()
	return t, nil
}

// ConnectionLimit is the most connections a run can open: the open-file
// limit, raised to its hard limit, less what the process keeps for
// itself. A run asked for more opens this many and says the generator
// was limited (Result.Saturated).
func ConnectionLimit() int {
	n, _ := raiseNofile(1 << 30)
	return n
}
