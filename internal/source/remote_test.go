package source_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agent"
	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/evidence"
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
// within seconds, says it was lost and keeps what came before.
func TestRemoteRecord(t *testing.T) {
	srv := startAgent(t)
	ctx := context.Background()
	r, err := source.NewRemote(ctx, source.RemoteConfig{URL: srv.URL, Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if off, unc := r.Clock(); off.Abs() > 50*time.Millisecond+unc {
		t.Errorf("clock offset %v ± %v between two clocks that are one", off, unc)
	}
	rec := source.Record(ctx, r, nil, 100*time.Millisecond)
	time.Sleep(500 * time.Millisecond)
	resume := source.Mark(ctx, rec)
	markDone := time.Now()
	time.Sleep(350 * time.Millisecond) // the agent takes three snapshots meanwhile
	resumed := time.Now()
	resume()
	time.Sleep(500 * time.Millisecond)

	srv.CloseClientConnections()
	srv.Close()
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	source.Stop(rec)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stopping after the agent went away took %v", d)
	}
	at, lost := rec.Lost()
	if lost == nil || !errors.Is(lost, source.ErrAgent) {
		t.Errorf("lost = %v, want the agent's error", lost)
	}
	b := rec.Bundle()
	if len(b.Snapshots) < 8 {
		t.Fatalf("%d snapshots in about 1.3 s at 100 ms", len(b.Snapshots))
	}
	for i, s := range b.Snapshots {
		if i > 0 && !s.Time.After(b.Snapshots[i-1].Time) {
			t.Errorf("snapshot %d at %v is not after %v", i, s.Time, b.Snapshots[i-1].Time)
		}
		if s.Time.After(markDone) && s.Time.Before(resumed) {
			t.Errorf("snapshot at %v began between the mark (%v) and the resume (%v)", s.Time, markDone, resumed)
		}
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
	if off, _ := r.Clock(); (off - skew).Abs() > 50*time.Millisecond {
		t.Errorf("offset %v, want about %v", off, skew)
	}
	ss, err := r.Next(context.Background(), time.Now().Add(-time.Minute), 0)
	if err != nil || len(ss) != 1 {
		t.Fatalf("%d snapshots, %v", len(ss), err)
	}
	if d := time.Since(ss[0].Time); d < 500*time.Millisecond || d > 1500*time.Millisecond {
		t.Errorf("snapshot at %v, want about a second ago on this clock", ss[0].Time)
	}
	if d := time.Since(ss[0].Kmsg[0].Time); d < 1500*time.Millisecond || d > 2500*time.Millisecond {
		t.Errorf("kernel message at %v, want about two seconds ago on this clock", ss[0].Kmsg[0].Time)
	}
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
			time.Sleep(100 * time.Millisecond) // a long poll's wait, shortened
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
