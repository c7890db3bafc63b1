package agent

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

const testToken = "s3cret-token-0123456789"

// newTestAgent is an agent of this namespace that never probes a
// resolver (tests send no traffic off the host). It is not started:
// tests feed its window themselves, or call tick.
func newTestAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	cfg.DNSEvery = -1
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// fixture is a real bundle: a listener that never accepts, 50 connects,
// ListenOverflows +123 (testdata/bundles/README.md).
func fixture(t *testing.T) *evidence.Bundle {
	t.Helper()
	b, err := os.ReadFile("../../testdata/bundles/accept-overflow.json")
	if err != nil {
		t.Fatal(err)
	}
	var bundle evidence.Bundle
	if err := json.Unmarshal(b, &bundle); err != nil {
		t.Fatal(err)
	}
	return &bundle
}

// feed adds snapshots to the agent's window as if taken from start on,
// one per second, and diagnoses after each.
func feed(t *testing.T, a *Agent, start time.Time, snaps []evidence.Snapshot) time.Time {
	t.Helper()
	for i, s := range snaps {
		s.Time = start.Add(time.Duration(i) * time.Second)
		if err := a.ring.add(s); err != nil {
			t.Fatal(err)
		}
		a.evaluate(s.Time)
	}
	return start.Add(time.Duration(len(snaps)) * time.Second)
}

func get(t *testing.T, srv *httptest.Server, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, srv.URL+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIAuth: the evidence API and /metrics answer only with the
// token; /healthz is open; an agent without a token serves neither.
func TestAPIAuth(t *testing.T) {
	a := newTestAgent(t, Config{})
	a.tick(t.Context())
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	code, body := get(t, srv, agentapi.PathHost, testToken)
	var info agentapi.HostInfo
	if code != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil || info.API != agentapi.Version || time.Since(info.Time) > time.Minute {
		t.Errorf("host with the token: %d %s", code, body)
	}
	if code, body := get(t, srv, agentapi.PathMetrics, testToken); code != http.StatusOK || !strings.Contains(body, "netdoctor_agent_snapshots_total") {
		t.Errorf("/metrics with the token: %d %.200s", code, body)
	}
	if code, body := get(t, srv, agentapi.PathSnapshot, ""); code != http.StatusUnauthorized || !strings.Contains(body, "bearer token") {
		t.Errorf("snapshot without a token: %d %s", code, body)
	}
	if code, body := get(t, srv, agentapi.PathMetrics, ""); code != http.StatusUnauthorized || strings.Contains(body, "netdoctor_") {
		t.Errorf("/metrics without a token: %d %s", code, body)
	}
	if code, _ := get(t, srv, agentapi.PathHealthz, ""); code != http.StatusOK {
		t.Errorf("/healthz: %d, want it open", code)
	}
	// Refused: 401, or 429 once this source's failures come faster than
	// the agent lets a guesser try.
	refused := func(code int) bool { return code == http.StatusUnauthorized || code == http.StatusTooManyRequests }
	for _, path := range []string{agentapi.PathMetrics, agentapi.PathHost, agentapi.PathSnapshot, agentapi.PathSnapshots, agentapi.PathFindings, agentapi.PathServers + "?port=80", agentapi.PathWatch + "x"} {
		if code, body := get(t, srv, path, ""); !refused(code) {
			t.Errorf("%s without a token: %d %s", path, code, body)
		}
		if code, _ := get(t, srv, path, testToken+"x"); !refused(code) {
			t.Errorf("%s with a wrong token: %d", path, code)
		}
		if code, _ := get(t, srv, path, testToken[:len(testToken)-1]); !refused(code) {
			t.Errorf("%s with the token's prefix: %d", path, code)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+agentapi.PathHost, nil)
	req.Header.Set("Authorization", "Basic "+testToken)
	if resp, err := srv.Client().Do(req); err != nil || !refused(resp.StatusCode) {
		t.Errorf("another scheme: %v %v", resp.StatusCode, err)
	}
	// This source has used its failures: the right token is refused
	// too, before it is compared, until the bucket refills.
	if code, body := get(t, srv, agentapi.PathHost, testToken); code != http.StatusTooManyRequests {
		t.Errorf("the right token from a blocked source: %d %s, want 429", code, body)
	}
	if code, body := get(t, srv, agentapi.PathMetrics, testToken); code != http.StatusTooManyRequests {
		t.Errorf("/metrics with the right token from a blocked source: %d %.100s, want 429", code, body)
	}
	// Asked every 100 ms: each request from the blocked source is one
	// the bucket refuses.
	poll.UntilEvery(t, time.Minute, 100*time.Millisecond, func() error {
		if code, _ := get(t, srv, agentapi.PathHost, testToken); code != http.StatusOK {
			return fmt.Errorf("still %d after the last failure", code)
		}
		return nil
	})

	closed := httptest.NewServer(a.Handler(nil))
	defer closed.Close()
	for _, path := range []string{agentapi.PathSnapshot, agentapi.PathMetrics} {
		if code, body := get(t, closed, path, testToken); code != http.StatusUnauthorized || !strings.Contains(body, "without --token-file") {
			t.Errorf("%s of an agent without a token: %d %s", path, code, body)
		}
	}
}

// TestMetricsHandler: the listener of its own serves /metrics and
// /healthz, and nothing of the evidence API.
func TestMetricsHandler(t *testing.T) {
	a := newTestAgent(t, Config{})
	a.tick(t.Context())
	srv := httptest.NewServer(a.MetricsHandler(false))
	defer srv.Close()
	if code, body := get(t, srv, agentapi.PathMetrics, ""); code != http.StatusOK || !strings.Contains(body, "netdoctor_agent_snapshots_total") {
		t.Errorf("/metrics: %d %.200s", code, body)
	}
	for _, path := range []string{agentapi.PathHost, agentapi.PathSnapshot, agentapi.PathFindings} {
		if code, _ := get(t, srv, path, testToken); code != http.StatusNotFound {
			t.Errorf("%s on the metrics listener: %d, want 404", path, code)
		}
	}
}

// TestAPILimits: the agent is read-only and bounded: other methods,
// bodies and long queries are refused, and failed authentications are
// slowed down.
func TestAPILimits(t *testing.T) {
	a := newTestAgent(t, Config{})
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch} {
		req, _ := http.NewRequest(m, srv.URL+agentapi.PathFindings, nil)
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %d, want 405", m, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+agentapi.PathFindings, strings.NewReader("x=1"))
	req.Header.Set("Authorization", "Bearer "+testToken)
	if resp, err := srv.Client().Do(req); err != nil || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("a body: %v %v, want 413", resp.StatusCode, err)
	}
	if code, _ := get(t, srv, agentapi.PathSnapshots+"?since="+strings.Repeat("x", 2000), testToken); code != http.StatusRequestURITooLong {
		t.Errorf("a long query: %d, want 414", code)
	}
	for _, q := range []string{"?since=yesterday", "?wait=forever", "?wait=-1s"} {
		if code, _ := get(t, srv, agentapi.PathSnapshots+q, testToken); code != http.StatusBadRequest {
			t.Errorf("snapshots%s: %d, want 400", q, code)
		}
	}
	for _, q := range []string{"", "?port=0", "?port=65536", "?port=http", "?port=80&dns_after=soon"} {
		if code, _ := get(t, srv, agentapi.PathServers+q, testToken); code != http.StatusBadRequest {
			t.Errorf("servers%s: %d, want 400", q, code)
		}
	}
	if code, _ := get(t, srv, agentapi.PathWatch+"0123", testToken); code != http.StatusNotFound {
		t.Errorf("unknown watch: %d, want 404", code)
	}
	var limited bool
	for range badBurst + 5 {
		code, _ := get(t, srv, agentapi.PathHost, "guess")
		limited = limited || code == http.StatusTooManyRequests
	}
	if !limited {
		t.Errorf("%d wrong tokens in a row were all answered 401: guessing is not slowed down", badBurst+5)
	}
}

// TestFindingsAndMetrics: a fault in the window is an active finding
// in the API and on /metrics, and is gone from both once the recent
// window no longer shows it.
func TestFindingsAndMetrics(t *testing.T) {
	a := newTestAgent(t, Config{Recent: 3 * time.Second})
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	if code, _ := get(t, srv, agentapi.PathFindings, testToken); code != http.StatusServiceUnavailable {
		t.Errorf("findings before any diagnosis: %d, want 503", code)
	}
	snaps := fixture(t).Snapshots
	next := feed(t, a, time.Now().Add(-time.Minute), snaps)

	code, body := get(t, srv, agentapi.PathFindings, testToken)
	var rep report.Report
	if code != http.StatusOK || json.Unmarshal([]byte(body), &rep) != nil {
		t.Fatalf("findings: %d %s", code, body)
	}
	if f := active(&rep, rules.AcceptQueueOverflow); f == nil {
		t.Fatalf("no active accept-queue-overflow in %s", body)
	}
	_, metrics := get(t, srv, agentapi.PathMetrics, testToken)
	if !strings.Contains(metrics, `netdoctor_finding_active{id="accept-queue-overflow",severity="critical",target=`) {
		t.Errorf("/metrics has no active accept-queue-overflow:\n%s", grep(metrics, "netdoctor_finding"))
	}

	// The counters stay where they got to, and the queue is empty
	// again (the first snapshot's sockets), for longer than the recent
	// window.
	quiet := make([]evidence.Snapshot, 5)
	for i := range quiet {
		quiet[i] = overflows(snaps[0], snaps[len(snaps)-1].Counters["TcpExt.ListenOverflows"])
	}
	feed(t, a, next, quiet)
	_, body = get(t, srv, agentapi.PathFindings, testToken)
	json.Unmarshal([]byte(body), &rep)
	if f := active(&rep, rules.AcceptQueueOverflow); f != nil {
		t.Errorf("accept-queue-overflow still active after %d quiet seconds: %+v", len(quiet), f.Evidence)
	}
	_, metrics = get(t, srv, agentapi.PathMetrics, testToken)
	if strings.Contains(metrics, `netdoctor_finding_active{id="accept-queue-overflow"`) {
		t.Errorf("/metrics still has it active:\n%s", grep(metrics, "netdoctor_finding"))
	}
}

func active(r *report.Report, id report.FindingID) *report.Finding {
	for i, f := range r.Findings {
		if f.ID == id && f.Status == report.Active {
			return &r.Findings[i]
		}
	}
	return nil
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestSnapshotsWindow: a client reads every snapshot once, in order,
// waits for the next when it has them all, and is told when it asked
// for more than the window still holds.
func TestSnapshotsWindow(t *testing.T) {
	a := newTestAgent(t, Config{Interval: time.Second, Retain: 100 * time.Second})
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	base := time.Now().Add(-time.Hour)
	snap := fixture(t).Snapshots[0]
	for i := range 150 { // more than the window holds, more than a response carries
		s := snap
		s.Time = base.Add(time.Duration(i) * time.Second)
		if err := a.ring.add(s); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := a.ring.Len(); n != 101 {
		t.Errorf("window holds %d snapshots, want 101 (100 s at 1 s)", n)
	}
	read := func(since time.Time, wait string) agentapi.Window {
		q := "?since=" + since.UTC().Format(time.RFC3339Nano)
		if wait != "" {
			q += "&wait=" + wait
		}
		code, body := get(t, srv, agentapi.PathSnapshots+q, testToken)
		var w agentapi.Window
		if code != http.StatusOK || json.Unmarshal([]byte(body), &w) != nil {
			t.Fatalf("snapshots%s: %d %.200s", q, code, body)
		}
		return w
	}
	w := read(base, "")
	if !w.Gap || !w.More || len(w.Snapshots) != agentapi.MaxSnapshots {
		t.Errorf("since before the window: gap %v more %v %d snapshots; want a gap, %d and more", w.Gap, w.More, len(w.Snapshots), agentapi.MaxSnapshots)
	}
	var got int
	var last time.Time
	for since := base.Add(48 * time.Second); ; { // the window holds 49 s to 149 s
		w := read(since, "")
		for _, raw := range w.Snapshots {
			var s evidence.Snapshot
			json.Unmarshal(raw, &s)
			if !s.Time.After(since) || !s.Time.After(last) {
				t.Fatalf("snapshot at %v after asking since %v (last %v)", s.Time, since, last)
			}
			last, since = s.Time, s.Time
			got++
		}
		if !w.More {
			break
		}
	}
	if got != 101 {
		t.Errorf("read %d snapshots one window after another, want all 101", got)
	}

	// Nothing new: the request waits for the next snapshot, and is
	// answered when it comes, not when the wait ends.
	added := make(chan struct{})
	go func() {
		defer close(added)
		if !poll.Wait(time.Minute, func() bool { return longPolls() == 1 }) {
			return
		}
		s := snap
		s.Time = last.Add(time.Second)
		a.ring.add(s)
	}()
	start := time.Now()
	w = read(last, "30s")
	<-added
	if len(w.Snapshots) != 1 || time.Since(start) >= 30*time.Second {
		t.Errorf("long poll: %d snapshots after %v; want the new one, before the wait ended", len(w.Snapshots), time.Since(start))
	}
	start = time.Now()
	w = read(last.Add(time.Second), "200ms")
	if len(w.Snapshots) != 0 || time.Since(start) < 150*time.Millisecond {
		t.Errorf("long poll with nothing new: %d snapshots after %v; want none after the wait", len(w.Snapshots), time.Since(start))
	}
}

// TestRingBytes: whatever a snapshot weighs, the window stays within
// its byte cap, keeping the newest.
func TestRingBytes(t *testing.T) {
	r := newRing(1000, 64<<10, 5)
	snap := fixture(t).Snapshots[4]
	base := time.Now()
	for i := range 200 {
		s := snap
		s.Time = base.Add(time.Duration(i) * time.Second)
		if err := r.add(s); err != nil {
			t.Fatal(err)
		}
	}
	n, b := r.Len()
	if b > 64<<10 || n < 2 {
		t.Errorf("%d snapshots, %d bytes: want at most 64 KiB", n, b)
	}
	if _, newest := r.Span(); !newest.Equal(base.Add(199 * time.Second)) {
		t.Errorf("newest %v: the last added must be kept", newest)
	}
	if len(r.Recent()) != 5 {
		t.Errorf("recent %d, want 5", len(r.Recent()))
	}
	if err := r.add(snap); err == nil {
		t.Errorf("a snapshot older than the newest was added: the window's order is its contract")
	}
	got, err := r.between(base.Add(190*time.Second), base.Add(195*time.Second))
	if err != nil || len(got) != 6 || got[0].Counters["TcpExt.ListenOverflows"] != 123 {
		t.Errorf("between: %d snapshots, %v", len(got), err)
	}
}

// overflows is s with the listen overflow and drop counters at n.
func overflows(s evidence.Snapshot, n uint64) evidence.Snapshot {
	c := make(map[string]uint64, len(s.Counters))
	for k, v := range s.Counters {
		c[k] = v
	}
	c["TcpExt.ListenOverflows"], c["TcpExt.ListenDrops"] = n, n
	s.Counters = c
	return s
}

// TestIncidents: when a finding turns active, the window around it is
// written once its "after" has passed, private to root, as a bundle
// whose diagnosis names the fault; a flapping finding does not write one
// per flap; the directory stays within its cap, newest kept.
func TestIncidents(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "incidents")
	a := newTestAgent(t, Config{Recent: 3 * time.Second, Retain: time.Minute, Incidents: dir, Before: 10 * time.Second, After: 3 * time.Second})
	snap := fixture(t).Snapshots[0]
	var burst, quiet []evidence.Snapshot
	for i := range 4 {
		burst = append(burst, overflows(snap, uint64(40*(i+1))))
	}
	for range 6 {
		quiet = append(quiet, overflows(snap, 160))
	}
	base := time.Now().Add(-10 * time.Minute)
	// The last dependency burst: an API's pool of 4 to its backend, half
	// busy (no finding of its own). The incident carries it.
	pool := app.Dependency{Addr: "10.0.0.1:7300", Owner: "backend (pid 77)", Observed: true, Conns: 4, Seconds: 3, Samples: 30,
		Busy: 0.5, RoundTripsPerSec: 195, RoundTrip: 20 * time.Millisecond, SegsOutPerSec: 195, SegsInPerSec: 195}
	a.deps.last = &evidence.Traced{Start: base, Seconds: 3, IntervalMS: 100, Followed: 1,
		Servers: []*app.Server{{Role: "front", Kind: "api", Addr: "10.0.0.1:8080", PIDs: []int{300}, Deps: []app.Dependency{pool}}}}
	a.deps.doneAt = base
	next := feed(t, a, base, []evidence.Snapshot{overflows(snap, 0), overflows(snap, 0), overflows(snap, 0), overflows(snap, 0), overflows(snap, 0)})
	faultAt := next
	next = feed(t, a, next, burst)
	next = feed(t, a, next, quiet)

	files := incidentFiles(t, dir)
	if len(files) != 1 {
		t.Fatalf("%d incidents written, want 1: %v", len(files), files)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("incidents directory: %v %v, want mode 0700", fi.Mode(), err)
	}
	if fi, _ := os.Stat(files[0]); fi.Mode().Perm() != 0o600 {
		t.Errorf("incident file mode %v, want 0600", fi.Mode())
	}
	// Written aside and linked under its name once complete: nothing
	// else left behind.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("incidents directory holds %d entries, want the incident alone: %v", len(ents), ents)
	}
	b := readIncident(t, files[0])
	if b.Incident == nil || len(b.Incident.Findings) == 0 || b.Incident.Findings[0].ID != string(rules.AcceptQueueOverflow) {
		t.Fatalf("incident metadata %+v", b.Incident)
	}
	// The agent followed no server: the incident says why it has no
	// profile of them (TestIncidentProfile has one).
	if b.Incident.Profile != nil || !strings.Contains(b.Incident.ProfileError, "follows no server") {
		t.Errorf("incident profile %+v, error %q", b.Incident.Profile, b.Incident.ProfileError)
	}
	first, last := b.Snapshots[0].Time, b.Snapshots[len(b.Snapshots)-1].Time
	at := b.Incident.Time
	if at.Sub(first) < 5*time.Second || last.Sub(at) < 3*time.Second || at.Before(faultAt) {
		t.Errorf("window %v to %v around %v (fault from %v): want 5 s before (all the window held) and 3 s after", first, last, at, faultAt)
	}
	found := false
	for _, f := range rules.Check(b) {
		found = found || f.ID == rules.AcceptQueueOverflow && f.Status == report.Active
	}
	if !found {
		t.Errorf("the incident's bundle does not diagnose as accept-queue-overflow")
	}
	tr := b.Incident.Dependencies
	if tr == nil || len(tr.Servers) != 1 || len(tr.Servers[0].Deps) != 1 {
		t.Fatalf("the incident's dependencies %+v", tr)
	}
	if d := tr.Servers[0].Deps[0]; d.Addr != "10.0.0.1:7300" || d.Conns != 4 || d.Busy != 0.5 || d.RoundTrip != 20*time.Millisecond {
		t.Errorf("the incident's dependency %+v", d)
	}

	// It flaps within the incident window: no new incident.
	var again []evidence.Snapshot
	for i := range 3 {
		again = append(again, overflows(snap, uint64(200+40*i)))
	}
	next = feed(t, a, next, again)
	quiet2 := make([]evidence.Snapshot, 6)
	for i := range quiet2 {
		quiet2[i] = overflows(snap, 300)
	}
	next = feed(t, a, next, quiet2)
	if n := len(incidentFiles(t, dir)); n != 1 {
		t.Errorf("a finding flapping within the incident window wrote %d incidents, want still 1", n)
	}

	// Later it is a new incident; with a cap smaller than two, only the
	// newest is kept.
	a.inc.maxBytes = 1
	var later []evidence.Snapshot
	for i := range 3 {
		later = append(later, overflows(snap, uint64(400+40*i)))
	}
	next = feed(t, a, next.Add(30*time.Second), later)
	quiet3 := make([]evidence.Snapshot, 6)
	for i := range quiet3 {
		quiet3[i] = overflows(snap, 500)
	}
	feed(t, a, next, quiet3)
	after := incidentFiles(t, dir)
	if len(after) != 1 || after[0] == files[0] {
		t.Errorf("after a second incident with a 1-byte cap: %v; want only the new one", after)
	}
}

func incidentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "incident-*.bundle.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func readIncident(t *testing.T, path string) *evidence.Bundle {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	// Read as diagnose reads it: a bundle file that says its kind.
	bf, err := evidence.Read(zr)
	if err != nil || bf.Kind != evidence.KindNamespace {
		t.Fatalf("incident %s: %+v, %v", path, bf, err)
	}
	return bf.Bundle
}

// BenchmarkEvaluate is the agent's work each second besides the
// snapshot: the rules over the recent window (31 snapshots at 1 Hz).
func BenchmarkEvaluate(b *testing.B) {
	a, err := New(Config{DNSEvery: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer a.Close()
	t := &testing.T{}
	snaps := fixture(t).Snapshots
	base := time.Now()
	for i := range 31 {
		s := snaps[i%len(snaps)]
		s.Time = base.Add(time.Duration(i) * time.Second)
		a.ring.add(s)
	}
	b.ResetTimer()
	for range b.N {
		a.evaluate(base.Add(31 * time.Second))
	}
}

// BenchmarkRingAdd is the cost of keeping one snapshot: JSON, compressed.
func BenchmarkRingAdd(b *testing.B) {
	r := newRing(900, 48<<20, 31)
	snap := fixture(&testing.T{}).Snapshots[4]
	base := time.Now()
	b.ResetTimer()
	for i := range b.N {
		s := snap
		s.Time = base.Add(time.Duration(i) * time.Second)
		if err := r.add(s); err != nil {
			b.Fatal(err)
		}
	}
}
