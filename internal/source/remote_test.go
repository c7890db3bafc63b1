package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agent"
	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/source"
)

var token = []byte("remote-test-token-0123456789")

// startAgent runs a real agent of this namespace every 100 ms, without
// resolver probes, behind a test HTTP server.
func startAgent(t *testing.T) *httptest.Server {
	t.Helper()
	a, err := agent.New(agent.Config{Interval: 100 * time.Millisecond, Retain: time.Minute, DNSEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewServer(a.Handler(token))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		a.Close()
	})
	return srv
}

// TestRemoteRecord: a recording through an agent gets every snapshot
// the agent took, once and in order; none that began between a mark and
// the resume; and when the agent goes away mid-way the recording ends
// within seconds, says it was lost and keeps what came before. Each
// step waits for the agent's snapshots it needs, however slowly a busy
// machine takes them.
func TestRemoteRecord(t *testing.T) {
	srv := startAgent(t)
	ctx := context.Background()
	r, err := source.NewRemote(ctx, source.RemoteConfig{URL: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Both ends read one clock: the agent read it between the request
	// and the answer, so the offset is within the uncertainty (half the
	// round trip), whatever the round trip took; 1 ms for the wall clock's
	// own adjustments meanwhile.
	if off, unc := r.Clock(); off.Abs() > unc+time.Millisecond {
		t.Errorf("clock offset %v ± %v between two clocks that are one", off, unc)
	}
	start := time.Now()
	rec := source.Record(ctx, r, nil, 100*time.Millisecond)
	after := func(at time.Time) []time.Time {
		var ts []time.Time
		for _, s := range rec.Times() {
			if s.After(at) {
				ts = append(ts, s)
			}
		}
		return ts
	}
	poll.True(t, time.Minute, "three snapshots recorded", func() bool { return len(rec.Times()) >= 3 })
	marking := time.Now()
	resume := source.Mark(ctx, rec)
	markDone := time.Now()
	// The agent goes on sampling while the recording holds: three of its
	// snapshots begin between the mark and the resume.
	var gap []evidence.Snapshot
	poll.Until(t, time.Minute, func() error {
		ss, err := r.Next(ctx, markDone, 0)
		gap = ss
		if err == nil && len(ss) < 3 {
			err = fmt.Errorf("%d agent snapshots since the mark", len(ss))
		}
		return err
	})
	resumed := time.Now()
	resume()
	resumeEnd := time.Now()
	_, unc := r.Clock()
	// What the recording may drop: snapshots that began after the mark's
	// own, up to the resume and the clocks' uncertainty after it.
	dropped := func(at time.Time) bool { return at.After(marking) && at.Before(resumeEnd.Add(unc)) }
	poll.True(t, time.Minute, "two snapshots recorded after the resume", func() bool { return len(after(resumed)) >= 2 })
	// Every snapshot the agent took so far, to find in the recording.
	took, err := r.Next(ctx, start, 0)
	if err != nil {
		t.Fatal(err)
	}

	srv.CloseClientConnections()
	srv.Close()
	poll.True(t, time.Minute, "the recording notices the agent is gone", func() bool { _, lost := rec.Lost(); return lost != nil })
	stop := time.Now()
	source.Stop(rec)
	// The last snapshot is asked of a lost agent for 2 s at most.
	if d := time.Since(stop); d > 5*time.Second {
		t.Errorf("stopping after the agent went away took %v", d)
	}
	at, lost := rec.Lost()
	if lost == nil || !errors.Is(lost, source.ErrAgent) {
		t.Errorf("lost = %v, want the agent's error", lost)
	}
	b := rec.Bundle()
	kept := map[time.Time]bool{}
	for i, s := range b.Snapshots {
		kept[s.Time] = true
		if i > 0 && !s.Time.After(b.Snapshots[i-1].Time) {
			t.Errorf("snapshot %d at %v is not after %v", i, s.Time, b.Snapshots[i-1].Time)
		}
		if s.Time.After(markDone) && s.Time.Before(resumed) {
			t.Errorf("snapshot at %v began between the mark (%v) and the resume (%v)", s.Time, markDone, resumed)
		}
	}
	missed := 0
	for _, s := range took {
		if !kept[s.Time] && !dropped(s.Time) {
			missed++
		}
	}
	if missed > 0 {
		t.Errorf("%d of the agent's %d snapshots (%d in the gap) missing from the recording's %d", missed, len(took), len(gap), len(b.Snapshots))
	}
	if last := b.Snapshots[len(b.Snapshots)-1].Time; !at.Equal(last) {
		t.Errorf("lost at %v, last snapshot at %v", at, last)
	}
}

// TestRemoteClock: an agent whose clock is an hour ahead gives
// snapshots on this host's clock.
func TestRemoteClock(t *testing.T) {
	const skew = time.Hour
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now().Add(skew)
		switch r.URL.Path {
		case agentapi.PathHost:
			json.NewEncoder(w).Encode(agentapi.HostInfo{API: agentapi.Version, Time: now})
		case agentapi.PathSnapshots:
			s, _ := json.Marshal(evidence.Snapshot{Time: now.Add(-time.Second), Kmsg: []evidence.KernelMsg{{Time: now.Add(-2 * time.Second), Text: "x"}}})
			json.NewEncoder(w).Encode(agentapi.Window{Now: now, Snapshots: []json.RawMessage{s}})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	r, err := source.NewRemote(context.Background(), source.RemoteConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	// The agent read its clock between the request and the answer: the
	// offset is the skew within half the round trip (the uncertainty).
	off, unc := r.Clock()
	if (off - skew).Abs() > unc+time.Millisecond {
		t.Errorf("offset %v ± %v, want %v", off, unc, skew)
	}
	asked := time.Now()
	ss, err := r.Next(context.Background(), time.Now().Add(-time.Minute), 0)
	answered := time.Now()
	if err != nil || len(ss) != 1 {
		t.Fatalf("%d snapshots, %v", len(ss), err)
	}
	// The agent dated the snapshot a second before it answered, and the
	// kernel message two: on this clock, that long before some moment
	// between the question and the answer, give or take the offset's
	// uncertainty.
	within := func(what string, at time.Time, ago time.Duration) {
		t.Helper()
		if at.Before(asked.Add(-ago-unc-time.Millisecond)) || at.After(answered.Add(-ago+unc+time.Millisecond)) {
			t.Errorf("%s at %v, want %v before a moment between %v and %v (± %v)", what, at, ago, asked, answered, unc)
		}
	}
	within("snapshot", ss[0].Time, time.Second)
	within("kernel message", ss[0].Kmsg[0].Time, 2*time.Second)
}

// TestRemoteErrors: a bad URL, an agent that is not there and a wrong
// token are errors that say so, at once.
func TestRemoteErrors(t *testing.T) {
	srv := startAgent(t)
	ctx := context.Background()
	for _, u := range []string{"ftp://127.0.0.1:9120", "127.0.0.1:9120", "http://127.0.0.1:9120/api", "http://"} {
		if _, err := source.NewRemote(ctx, source.RemoteConfig{URL: u, Token: token}); !errors.Is(err, source.ErrAgent) {
			t.Errorf("URL %q: %v", u, err)
		}
	}
	start := time.Now()
	if _, err := source.NewRemote(ctx, source.RemoteConfig{URL: "http://127.0.0.1:1", Token: token}); !errors.Is(err, source.ErrAgent) {
		t.Errorf("nobody there: %v", err)
	}
	// At once: not after the 5 s a request to an agent may take.
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("a refused connection took %v to report", d)
	}
	if _, err := source.NewRemote(ctx, source.RemoteConfig{URL: srv.URL, Token: []byte("wrong-token-0123456789")}); !errors.Is(err, source.ErrUnauthorized) {
		t.Errorf("wrong token: %v", err)
	}
}

// TestRemoteConnections: before any load the recording opens all the
// connections it will use, and a burst of requests beyond them waits for
// one rather than dialing: under load a full conntrack table on the path
// drops new connections, and the agent would be lost.
func TestRemoteConnections(t *testing.T) {
	var mu sync.Mutex
	opened := 0
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		switch r.URL.Path {
		case agentapi.PathHost:
			json.NewEncoder(w).Encode(agentapi.HostInfo{API: agentapi.Version, Time: now})
		case agentapi.PathSnapshots:
			// A long poll's wait, shortened: the requests of a burst
			// overlap (a sleep that is the thing under test).
			time.Sleep(100 * time.Millisecond) // the long poll's wait under test
			json.NewEncoder(w).Encode(agentapi.Window{Now: now})
		default:
			http.NotFound(w, r)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			mu.Lock()
			opened++
			mu.Unlock()
		}
	}
	srv.Start()
	defer srv.Close()
	count := func() int { mu.Lock(); defer mu.Unlock(); return opened }

	r, err := source.NewRemote(context.Background(), source.RemoteConfig{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	warmed := count()
	if warmed < 4 {
		t.Fatalf("%d connections opened before the load, want at least the 4 a recording uses at once", warmed)
	}
	burst := func(n int) {
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := r.Next(context.Background(), time.Now(), time.Second); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	burst(20)
	if n := count(); n != warmed {
		t.Errorf("%d connections opened during a burst of 20 requests, want none beyond the %d opened before", n-warmed, warmed)
	}
	// Stopping a recording cancels its long poll, whose connection
	// closes; two of them, then what the end of a recording asks at once.
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		r.Next(ctx, time.Now(), time.Second)
		cancel()
	}
	burst(4)
	if n := count(); n != warmed {
		t.Errorf("%d connections opened after two cancelled long polls, want none beyond the %d opened before", n-warmed, warmed)
	}
}
