package source

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Streamer is the stream of a Source that samples by itself, every
// interval: a remote agent (Source.Stream). Record follows its snapshots
// (Next) instead of asking for each, so nothing the source saw between
// two requests is lost: a kernel log line belongs to the snapshot that
// read it, whoever asked for that one.
type Streamer interface {
	// Take takes a snapshot now; the stream carries it too.
	Take(ctx context.Context) (evidence.Snapshot, error)
	// Next returns the snapshots taken after 'after' (this host's
	// clock), oldest first, waiting up to wait for one when there is
	// none yet.
	Next(ctx context.Context, after time.Time, wait time.Duration) ([]evidence.Snapshot, error)
	// Clock is the source's clock minus this host's, and the bound of
	// that measurement's error. Times the source returns are already
	// on this host's clock.
	Clock() (offset, uncertainty time.Duration)
}

// RemoteConfig says how to reach an agent.
type RemoteConfig struct {
	// URL is the agent's base URL: http(s)://HOST:PORT.
	URL   string
	Token []byte
	// CAFile, when set, is the PEM certificate(s) an https agent's
	// certificate must chain to, instead of the system's roots.
	CAFile string
	// DNS and DNSAfter are the terms on which the watches Discover
	// opens ask the agent to probe its resolvers: once, DNSAfter from
	// the watch's opening, when DNS is set or as soon as the servers'
	// workers are seen waiting in a name lookup (what collect.Config's
	// DNSWhen and DNSDelay are to a Local).
	DNS      bool
	DNSAfter time.Duration
}

// ErrAgent marks a failure to reach or use an agent.
var ErrAgent = errors.New("agent")

// Remote is a namespace observed by `netdoctor agent` on another host
// (or in another namespace), over its evidence API. Times it returns are
// on this host's clock: the offset between the clocks is measured when
// it connects.
type Remote struct {
	base  *url.URL
	token string
	// dns and dnsAfter: RemoteConfig's.
	dns      bool
	dnsAfter time.Duration
	client   *http.Client
	info     agentapi.HostInfo
	// offset is the agent's clock minus ours; uncertainty bounds its
	// error (half the best round trip).
	offset, uncertainty time.Duration
}

// NewRemote checks the URL, connects to the agent and measures the
// offset between the two clocks. It fails when the agent cannot be
// reached or refuses the token.
func NewRemote(ctx context.Context, cfg RemoteConfig) (*Remote, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" {
		return nil, fmt.Errorf("%w URL %q: want http(s)://HOST:PORT", ErrAgent, cfg.URL)
	}
	u.Path = ""
	tr := &http.Transport{
		Proxy: nil, // the agent is reached directly, never through a proxy from the environment
		// The connections warm opens are all there will be: a request
		// beyond them waits for one to come free rather than dial a new
		// connection that a full table on the path may drop.
		MaxIdleConnsPerHost:   agentConns,
		MaxConnsPerHost:       agentConns,
		IdleConnTimeout:       10 * time.Minute,
		TLSHandshakeTimeout:   5 * time.Second,
		ResponseHeaderTimeout: agentapi.MaxWait + 10*time.Second,
		DisableCompression:    false,
	}
	if cfg.CAFile != "" {
		pem, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w CA file: %w", ErrAgent, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w CA file %s: no PEM certificate in it", ErrAgent, cfg.CAFile)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	r := &Remote{base: u, token: string(cfg.Token), client: &http.Client{Transport: tr}, dns: cfg.DNS, dnsAfter: cfg.DNSAfter}
	if err := r.measure(ctx); err != nil {
		return nil, err
	}
	r.warm(ctx)
	return r, nil
}

// agentConns is how many connections to the agent a recording keeps.
// It uses up to four at once (the stream's long poll or the last
// snapshot, the servers' samples, the dependency trace's marks, a
// snapshot on request), and a request cancelled in flight (the long
// poll when the recording stops, one that timed out) closes its
// connection: the rest is for those.
const agentConns = 6

// warm opens, before any load, the connections a recording uses at once
// and keeps them: once the load fills the path's tables (a full
// conntrack table drops new connections, not established ones) a new
// connection to the agent may not get through. Each request holds its
// connection until all have one, so that they cannot share: agentConns
// distinct connections, not one reused in turn.
func (r *Remote) warm(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var got sync.WaitGroup
	got.Add(agentConns)
	all := make(chan struct{})
	go func() { got.Wait(); close(all) }()
	var wg sync.WaitGroup
	for range agentConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var once sync.Once
			arrived := func() { once.Do(got.Done) }
			defer arrived() // a request that fails does not hold the others
			trace := &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) {
				arrived()
				select {
				case <-all:
				case <-ctx.Done():
				}
			}}
			var info agentapi.HostInfo
			r.get(httptrace.WithClientTrace(ctx, trace), agentapi.PathHost, nil, 5*time.Second, &info)
		}()
	}
	wg.Wait()
}

// measure asks the agent for its clock a few times and keeps the
// answer with the shortest round trip, NTP's way: the agent read its
// clock about halfway through.
func (r *Remote) measure(ctx context.Context) error {
	best := time.Duration(-1)
	for range 5 {
		var info agentapi.HostInfo
		t0 := time.Now()
		if err := r.get(ctx, agentapi.PathHost, nil, 5*time.Second, &info); err != nil {
			if best >= 0 {
				break
			}
			if errors.Is(err, errNoEndpoint) {
				return fmt.Errorf("%w at %s does not serve API version %d (%s): it is an older netdoctor; run the same netdoctor version on both ends", ErrAgent, r.base, agentapi.Version, agentapi.Prefix)
			}
			return err
		}
		rtt := time.Since(t0)
		if info.API != agentapi.Version {
			return fmt.Errorf("%w at %s speaks API version %d, this netdoctor version %d", ErrAgent, r.base, info.API, agentapi.Version)
		}
		if best < 0 || rtt < best {
			best, r.info = rtt, info
			mid := t0.Add(rtt / 2)
			r.offset = info.Time.Sub(mid)
			r.uncertainty = rtt / 2
		}
	}
	return nil
}

// URL is the agent's base URL.
func (r *Remote) URL() string { return r.base.String() }

// Clock is the agent's clock minus this host's, and the bound of the
// measurement's error.
func (r *Remote) Clock() (offset, uncertainty time.Duration) { return r.offset, r.uncertainty }

// Stream implements Source: the agent samples by itself.
func (r *Remote) Stream() Streamer { return r }

// Host implements Source.
func (r *Remote) Host() evidence.Host { return r.info.Host }

// Snapshot implements Source: a snapshot taken now. When the agent
// cannot be reached it is empty, and its status says why.
func (r *Remote) Snapshot(ctx context.Context) evidence.Snapshot {
	s, err := r.Take(ctx)
	if err != nil {
		return evidence.Snapshot{Time: time.Now(), Status: []evidence.Status{{Collector: "agent", State: evidence.StateError, Error: err.Error()}}}
	}
	return s
}

// Take implements Streamer.
func (r *Remote) Take(ctx context.Context) (evidence.Snapshot, error) {
	var s evidence.Snapshot
	if err := r.get(ctx, agentapi.PathSnapshot, nil, 30*time.Second, &s); err != nil {
		return s, err
	}
	r.local(&s)
	return s, nil
}

// Next implements Streamer. A window that the agent had to cut (More)
// is followed at once, so one call returns all that is there.
func (r *Remote) Next(ctx context.Context, after time.Time, wait time.Duration) ([]evidence.Snapshot, error) {
	var out []evidence.Snapshot
	since := after.Add(r.offset)
	// Pages of MaxSnapshots: a full window of 15 min at 1 Hz is 15; an
	// agent that says "more" for ever is cut short.
	for range 1000 {
		q := url.Values{"since": {since.UTC().Format(time.RFC3339Nano)}}
		if wait > 0 {
			q.Set("wait", wait.String())
		}
		var w agentapi.Window
		if err := r.get(ctx, agentapi.PathSnapshots, q, wait+15*time.Second, &w); err != nil {
			return out, err
		}
		for _, raw := range w.Snapshots {
			var s evidence.Snapshot
			if err := json.Unmarshal(raw, &s); err != nil {
				return out, fmt.Errorf("%w %s: snapshot: %w", ErrAgent, r.base, err)
			}
			if !s.Time.After(since) {
				return out, fmt.Errorf("%w %s: snapshots out of order", ErrAgent, r.base)
			}
			since = s.Time
			r.local(&s)
			out = append(out, s)
		}
		if !w.More || len(w.Snapshots) == 0 {
			return out, nil
		}
		wait = 0
	}
	return out, nil
}

// local moves a snapshot's times onto this host's clock.
func (r *Remote) local(s *evidence.Snapshot) {
	s.Time = s.Time.Add(-r.offset)
	for i := range s.Kmsg {
		s.Kmsg[i].Time = s.Kmsg[i].Time.Add(-r.offset)
	}
}

// Discover implements Source: the agent watches the servers behind port
// for this run, every second, until Finish, and probes its resolvers on
// the terms of RemoteConfig's DNS and DNSAfter.
func (r *Remote) Discover(ctx context.Context, port int) Apps {
	q := url.Values{"port": {strconv.Itoa(port)}, "dns_after": {r.dnsAfter.String()}}
	if r.dns {
		q.Set("dns", "1")
	}
	var w agentapi.Watch
	if err := r.get(ctx, agentapi.PathServers, q, 15*time.Second, &w); err != nil || w.ID == "" || len(w.Servers) == 0 {
		return nil
	}
	r.localServers(w.Servers)
	return &remoteApps{r: r, id: w.ID, servers: w.Servers}
}

func (r *Remote) localServers(ss []*app.Server) {
	for _, s := range ss {
		for i := range s.Samples {
			s.Samples[i].Time = s.Samples[i].Time.Add(-r.offset)
		}
	}
}

// Close implements Source.
func (r *Remote) Close() error {
	r.client.CloseIdleConnections()
	return nil
}

// get fetches path with the token and decodes the JSON answer into v.
// An error names the agent and what it said.
// errNoEndpoint is an agent without the path asked for: one of another
// API version.
var errNoEndpoint = errors.New("no such endpoint")

func (r *Remote) get(ctx context.Context, path string, q url.Values, timeout time.Duration, v any) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	u := *r.base
	u.Path = path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrAgent, r.base, err)
	}
	if r.token != "" {
		req.Header.Set("Authorization", "Bearer "+r.token)
	}
	req.Header.Set("User-Agent", "netdoctor")
	resp, err := r.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w %s unreachable (%s): %w", ErrAgent, r.base, path, unwrapURL(err))
	}
	defer func() {
		// Read to the end (the JSON's newline), or the connection is
		// not reused: a new one may not get through a path whose
		// tables the load fills (see warm).
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
	}()
	// Bounded: a window is at most MaxSnapshots snapshots, each a few
	// tens of KiB.
	body := io.LimitReader(resp.Body, 64<<20)
	if resp.StatusCode != http.StatusOK {
		var e agentapi.Error
		b, _ := io.ReadAll(io.LimitReader(body, 4096))
		msg := strings.TrimSpace(string(b))
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if resp.StatusCode == http.StatusUnauthorized {
			return fmt.Errorf("%w %s refused the token (%s): %w", ErrAgent, r.base, msg, ErrUnauthorized)
		}
		if resp.StatusCode == http.StatusNotFound && path == agentapi.PathHost {
			return fmt.Errorf("%w %s: %s: %s: %w", ErrAgent, r.base, resp.Status, msg, errNoEndpoint)
		}
		return fmt.Errorf("%w %s: %s: %s", ErrAgent, r.base, resp.Status, msg)
	}
	if err := json.NewDecoder(body).Decode(v); err != nil {
		return fmt.Errorf("%w %s: %s: %w", ErrAgent, r.base, path, err)
	}
	return nil
}

// ErrUnauthorized marks an agent that refused the token.
var ErrUnauthorized = errors.New("unauthorized")

// unwrapURL drops url.Error's repetition of the method and URL.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// remoteApps is a watch the agent keeps for this run.
type remoteApps struct {
	r  *Remote
	id string

	mu      sync.Mutex
	servers []*app.Server
	last    time.Time // the agent's time of the last sample received
	err     error
}

// Sample implements Apps: it fetches the samples the agent took since
// the last call. A failed request only leaves a gap.
func (a *remoteApps) Sample(ctx context.Context) {
	a.mu.Lock()
	since := a.last
	a.mu.Unlock()
	var w agentapi.Watch
	q := url.Values{}
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	if err := a.r.get(ctx, agentapi.PathWatch+a.id, q, 5*time.Second, &w); err != nil {
		a.mu.Lock()
		a.err = err
		a.mu.Unlock()
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.merge(w.Servers, false)
}

// merge adds the samples of a watch's answer to the servers; on finish
// it takes the servers' logs too.
func (a *remoteApps) merge(ss []*app.Server, finish bool) {
	since, newest := a.last, a.last
	for _, s := range ss {
		var mine *app.Server
		for _, m := range a.servers {
			if m.Addr == s.Addr && m.Role == s.Role {
				mine = m
			}
		}
		if mine == nil {
			if s.Role != "dependency" {
				continue
			}
			// A dependency the agent's trace found listening on its
			// host: a server of the run from now on.
			mine = &app.Server{Role: s.Role, Addr: s.Addr, Kind: s.Kind, Master: s.Master, PIDs: s.PIDs, Exe: s.Exe, Config: s.Config, Nginx: s.Nginx, Pool: s.Pool}
			a.servers = append(a.servers, mine)
		}
		// The agent learns a server's cgroup at its first CPU sample,
		// after the watch opened.
		if s.CGroup != nil {
			mine.CGroup = s.CGroup
		}
		if mine.Runtime == nil {
			mine.Runtime = s.Runtime
		}
		for _, smp := range s.Samples {
			if !smp.Time.After(since) {
				continue
			}
			if smp.Time.After(newest) {
				newest = smp.Time
			}
			smp.Time = smp.Time.Add(-a.r.offset)
			mine.Samples = append(mine.Samples, smp)
		}
		if finish {
			mine.Logs = s.Logs
			mine.Notes = s.Notes
			mine.Deps = s.Deps
		}
	}
	a.last = newest
}

// TraceDeps implements Apps: it follows the load for the agent's
// dependency trace. The agent traces from the watch's opening; this tells
// it that the load starts, so that it begins again then, and, when ctx
// ends, that the load ended. The dependencies come with Finish. An
// agent that does not trace answers all the same, with none.
// Processes is empty: the agent's host is another, whose processes the
// agent profiles itself (GET /api/v2/profile).
func (a *remoteApps) Processes() map[int]string { return nil }

func (a *remoteApps) TraceDeps(ctx context.Context) error {
	if err := a.loadMark(ctx, "start"); err != nil {
		return err
	}
	<-ctx.Done()
	return a.loadMark(context.WithoutCancel(ctx), "end")
}

// loadMark tells the agent that the load starts or ends. The samples it
// answers with are left for Sample, which asks since the last one.
func (a *remoteApps) loadMark(ctx context.Context, mark string) error {
	q := url.Values{"load": {mark}, "since": {time.Now().Add(a.r.offset + time.Hour).UTC().Format(time.RFC3339Nano)}}
	var w agentapi.Watch
	if err := a.r.get(ctx, agentapi.PathWatch+a.id, q, 5*time.Second, &w); err != nil {
		return fmt.Errorf("dependency trace: %w", err)
	}
	return nil
}

// Last implements Apps.
func (a *remoteApps) Last() []app.Sample {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []app.Sample
	for _, s := range a.servers {
		if n := len(s.Samples); n > 0 {
			out = append(out, s.Samples[n-1])
		}
	}
	return out
}

// Finish implements Apps: the last samples and what the logs gained,
// and the watch ends. When the agent cannot be reached the servers come
// back with the samples received so far, and a note.
func (a *remoteApps) Finish() []*app.Server {
	var w agentapi.Watch
	q := url.Values{"finish": {"1"}}
	a.mu.Lock()
	if !a.last.IsZero() {
		q.Set("since", a.last.UTC().Format(time.RFC3339Nano))
	}
	a.mu.Unlock()
	err := a.r.get(context.Background(), agentapi.PathWatch+a.id, q, 5*time.Second, &w)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		for _, s := range a.servers {
			s.Notes = append(s.Notes, fmt.Sprintf("logs not read and last samples missing: %v", err))
		}
		return a.servers
	}
	a.merge(w.Servers, true)
	return a.servers
}

// Findings is the agent's current diagnosis of its recent window.
func (r *Remote) Findings(ctx context.Context) (*agentapi.Findings, error) {
	var f agentapi.Findings
	if err := r.get(ctx, agentapi.PathFindings, nil, 15*time.Second, &f); err != nil {
		return nil, err
	}
	return &f, nil
}
