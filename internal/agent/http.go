package agent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"golang.org/x/time/rate"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/bysource"
)

// Limits of the HTTP server: no request can make the agent hold more
// than a bounded amount of memory or work.
const (
	maxQuery            = 1024 // bytes of query string
	maxHeaderBytes      = 16 << 10
	maxLongPolls        = 16     // snapshots requests waiting at once
	apiRate, apiBurst   = 20, 60 // requests per second, all clients together
	takeRate, takeBurst = 2, 4   // fresh snapshots per second on request
	badRate, badBurst   = 2, 10  // failed authentications per second, per source
	maxSources          = 4096   // sources whose failures are remembered
)

// Handler serves the agent's endpoints. token is the bearer token the
// evidence API and /metrics require (the series name the host's
// listeners, their processes and busiest destinations); without one
// both refuse every request and only /healthz is served. MetricsHandler
// serves /metrics on a listener of its own.
func (a *Agent) Handler(token []byte) http.Handler {
	h := &handler{a: a, api: rate.NewLimiter(apiRate, apiBurst), take: rate.NewLimiter(takeRate, takeBurst), bad: bysource.NewFailures(badRate, badBurst, maxSources),
		polls: make(chan struct{}, maxLongPolls)}
	if len(token) > 0 {
		sum := sha256.Sum256(token)
		h.token = &sum
	}
	reg := a.registry()
	h.requests = a.apiRequests()
	mux := http.NewServeMux()
	mux.HandleFunc(agentapi.PathMetrics, h.auth(a.metricsHandler(reg).ServeHTTP))
	mux.HandleFunc(agentapi.PathHealthz, h.healthz)
	mux.HandleFunc(agentapi.PathHost, h.auth(h.host))
	mux.HandleFunc(agentapi.PathSnapshot, h.auth(h.snapshot))
	mux.HandleFunc(agentapi.PathSnapshots, h.auth(h.snapshots))
	mux.HandleFunc(agentapi.PathFindings, h.auth(h.findings))
	mux.HandleFunc(agentapi.PathServers, h.auth(h.servers))
	mux.HandleFunc(agentapi.PathWatch+"{id}", h.auth(h.watch))
	mux.HandleFunc(agentapi.PathProfile, h.auth(h.profileHandler))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "no such endpoint: see docs/agent.md (API v%d under %s)", agentapi.Version, agentapi.Prefix)
	})
	return h.limits(mux)
}

// MetricsHandler serves /metrics and /healthz alone, for a listener of
// their own (agent --metrics-listen): whatever protects that listener
// (the exporter-toolkit's TLS and basic auth) protects them. local says
// that nothing does but its being on loopback: every local user reaches
// it, and it serves only what a local user can read anyway (the series
// of sockets, conntrack and resolvers, without the processes that own
// them; docs/agent.md, "Who sees what").
func (a *Agent) MetricsHandler(local bool) http.Handler {
	h := &handler{a: a, requests: a.apiRequests()}
	mux := http.NewServeMux()
	mux.Handle(agentapi.PathMetrics, a.metricsHandler(a.registryOf(local)))
	mux.HandleFunc(agentapi.PathHealthz, h.healthz)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, "this listener serves %s and %s only", agentapi.PathMetrics, agentapi.PathHealthz)
	})
	return h.limits(mux)
}

// metricsHandler serves the registry in Prometheus's text format.
func (a *Agent) metricsHandler(reg *prometheus.Registry) http.Handler {
	prom := promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, MaxRequestsInFlight: 4, Timeout: 10 * time.Second})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The cost of a scrape is served by the next one.
		start := time.Now()
		prom.ServeHTTP(w, r)
		a.stats.lastScrape.Store(int64(time.Since(start)))
	})
}

type handler struct {
	a     *Agent
	token *[sha256.Size]byte
	// api bounds the evidence API's requests; take the fresh snapshots
	// they may ask for; bad failed authentications per source, so a
	// token cannot be guessed at speed.
	api, take *rate.Limiter
	bad       *bysource.Failures
	polls     chan struct{}
	requests  *prometheus.CounterVec
}

// Server is an http.Server for the handler with the agent's timeouts:
// a slow client cannot hold a connection, a long poll still fits.
func Server(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      agentapi.MaxWait + 30*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    maxHeaderBytes,
	}
}

// limits refuses what no endpoint takes: other methods than GET and
// HEAD, request bodies, long query strings.
func (h *handler) limits(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &status{ResponseWriter: w, code: http.StatusOK}
		defer func() { h.requests.WithLabelValues(pathLabel(r.URL.Path), strconv.Itoa(rec.code)).Inc() }()
		switch {
		case r.Method != http.MethodGet && r.Method != http.MethodHead:
			rec.Header().Set("Allow", "GET, HEAD")
			fail(rec, http.StatusMethodNotAllowed, "the agent is read-only: GET only")
			return
		case r.ContentLength > 0 || len(r.TransferEncoding) > 0:
			fail(rec, http.StatusRequestEntityTooLarge, "requests carry no body")
			return
		case len(r.URL.RawQuery) > maxQuery:
			fail(rec, http.StatusRequestURITooLong, "query longer than %d bytes", maxQuery)
			return
		}
		next.ServeHTTP(rec, r)
	})
}

// pathLabel keeps the metric's path label bounded: watch IDs and
// unknown paths are folded.
func pathLabel(p string) string {
	switch {
	case strings.HasPrefix(p, agentapi.PathWatch):
		return agentapi.PathWatch + "{id}"
	case p == agentapi.PathMetrics, p == agentapi.PathHealthz, p == agentapi.PathHost, p == agentapi.PathSnapshot,
		p == agentapi.PathSnapshots, p == agentapi.PathFindings, p == agentapi.PathServers, p == agentapi.PathProfile:
		return p
	}
	return "other"
}

type status struct {
	http.ResponseWriter
	code int
}

func (s *status) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *status) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// auth admits requests that carry the token, compared in constant time
// (of their SHA-256, so that the comparison does not leak the length
// either), and rate-limits the API.
func (h *handler) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if h.token == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="netdoctor"`)
			fail(w, http.StatusUnauthorized, "this agent was started without --token-file: its evidence API and /metrics are closed (agent --metrics-listen serves /metrics on a listener of its own)")
			return
		}
		// A source over its failures is refused before the comparison:
		// the right token after many wrong ones waits like them.
		now := time.Now()
		if h.bad.Blocked(r.RemoteAddr, now) {
			w.Header().Set("Retry-After", "1")
			fail(w, http.StatusTooManyRequests, "too many failed authentications from this address")
			return
		}
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
		if !ok || !strings.EqualFold(scheme, "Bearer") || subtle.ConstantTimeCompare(sum[:], h.token[:]) != 1 {
			h.bad.Fail(r.RemoteAddr, now)
			w.Header().Set("WWW-Authenticate", `Bearer realm="netdoctor"`)
			fail(w, http.StatusUnauthorized, "missing or wrong bearer token (Authorization: Bearer <token>)")
			return
		}
		if !h.api.Allow() {
			w.Header().Set("Retry-After", "1")
			fail(w, http.StatusTooManyRequests, "more than %d requests per second", apiRate)
			return
		}
		next(w, r)
	}
}

func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	if err := h.a.healthy(time.Now()); err != nil {
		http.Error(w, "unhealthy: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintln(w, "ok")
}

func (h *handler) host(w http.ResponseWriter, r *http.Request) {
	oldest, _ := h.a.ring.Span()
	reply(w, agentapi.HostInfo{API: agentapi.Version, Agent: h.a.cfg.Version, Host: h.a.host, Time: time.Now(),
		Interval: h.a.cfg.Interval, Retain: h.a.cfg.Retain, Oldest: oldest, TestEndpoint: h.a.cfg.TestEndpoint})
}

func (h *handler) snapshot(w http.ResponseWriter, r *http.Request) {
	if !h.take.Allow() {
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusTooManyRequests, "more than %d fresh snapshots per second: use %s for the periodic ones", takeRate, agentapi.PathSnapshots)
		return
	}
	// The snapshot joins the window: a client that goes away must not
	// leave a half-taken one there.
	snap, err := h.a.Take(context.WithoutCancel(r.Context()))
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	reply(w, snap)
}

// snapshots serves the window after since, waiting up to wait for a
// snapshot when there is none yet.
func (h *handler) snapshots(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			fail(w, http.StatusBadRequest, "since: not an RFC 3339 time: %q", s)
			return
		}
		since = t
	}
	wait, err := duration(q.Get("wait"), agentapi.MaxWait)
	if err != nil {
		fail(w, http.StatusBadRequest, "wait: %v", err)
		return
	}
	items, more, gap, added := h.a.ring.after(since, agentapi.MaxSnapshots)
	if len(items) == 0 && wait > 0 {
		select {
		case h.polls <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "1")
			fail(w, http.StatusServiceUnavailable, "more than %d requests waiting for snapshots", maxLongPolls)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-added:
		case <-t.C:
		case <-r.Context().Done():
		}
		t.Stop()
		<-h.polls
		items, more, gap, _ = h.a.ring.after(since, agentapi.MaxSnapshots)
	}
	out := agentapi.Window{Now: time.Now(), More: more, Gap: gap, Snapshots: []json.RawMessage{}}
	for _, it := range items {
		b, err := it.raw()
		if err != nil {
			fail(w, http.StatusInternalServerError, "%v", err)
			return
		}
		out.Snapshots = append(out.Snapshots, b)
	}
	reply(w, out)
}

func (h *handler) findings(w http.ResponseWriter, r *http.Request) {
	rep := h.a.Current()
	if rep == nil {
		w.Header().Set("Retry-After", "2")
		fail(w, http.StatusServiceUnavailable, "no diagnosis yet: the agent needs two snapshots")
		return
	}
	reply(w, rep)
}

// servers opens a watch on the servers behind a port.
func (h *handler) servers(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	port, err := strconv.Atoi(q.Get("port"))
	if err != nil || port < 1 || port > 65535 {
		fail(w, http.StatusBadRequest, "port: want a TCP port, 1 to 65535, got %q", q.Get("port"))
		return
	}
	dns := q.Get("dns") == "1" || q.Get("dns") == "true"
	after, err := duration(q.Get("dns_after"), 10*time.Minute)
	if err != nil {
		fail(w, http.StatusBadRequest, "dns_after: %v", err)
		return
	}
	snaps := h.a.ring.Recent()
	if len(snaps) == 0 || snaps[len(snaps)-1].Sockets == nil {
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusServiceUnavailable, "no socket snapshot yet")
		return
	}
	now := time.Now()
	wt, err := h.a.watches.open(r.Context(), snaps[len(snaps)-1].Sockets.Listeners, port, clientAddr(r), dns, after, now)
	switch {
	case errors.Is(err, errTooMany):
		w.Header().Set("Retry-After", "10")
		fail(w, http.StatusServiceUnavailable, "%v", err)
		return
	case err != nil:
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	case wt == nil:
		reply(w, agentapi.Watch{Port: port, Now: now, Servers: nil})
		return
	}
	h.a.cfg.Log.Info("watch opened", "id", wt.id, "port", port, "from", wt.from, "servers", len(wt.obs.Current()))
	reply(w, wt.view(now, false, now))
}

// watch serves an open watch's samples after since; load=start or
// load=end says that the client's load starts or ends (the dependency
// trace follows it); finish=1 also counts the logs and ends it.
func (h *handler) watch(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	wt := h.a.watches.get(r.PathValue("id"), now)
	if wt == nil {
		fail(w, http.StatusNotFound, "no such watch (finished, or idle for more than %v)", agentapi.WatchTTL)
		return
	}
	q := r.URL.Query()
	var since time.Time
	if s := q.Get("since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			fail(w, http.StatusBadRequest, "since: not an RFC 3339 time: %q", s)
			return
		}
		since = t
	}
	finish := q.Get("finish") == "1" || q.Get("finish") == "true"
	switch l := q.Get("load"); l {
	case "":
	case "start", "end":
		wt.load(l == "start")
	default:
		fail(w, http.StatusBadRequest, "load: want start or end, got %q", l)
		return
	}
	v := wt.view(since, finish, now)
	if finish {
		h.a.watches.finish(wt)
		h.a.cfg.Log.Info("watch finished", "id", wt.id, "port", wt.port)
	}
	reply(w, v)
}

// duration parses a query duration, 0 when empty, at most limit.
func duration(s string, limit time.Duration) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("not a duration: %q", s)
	case d < 0:
		return 0, fmt.Errorf("negative: %q", s)
	}
	return min(d, limit), nil
}

func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func reply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(agentapi.Error{Error: fmt.Sprintf(format, args...)})
}

// Serve serves the handler on ln until ctx ends, then shuts down,
// letting requests in flight finish for a few seconds.
func Serve(ctx context.Context, srv *http.Server, serve func() error) error {
	errc := make(chan error, 1)
	go func() { errc <- serve() }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
