package agent

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// tracing counts the goroutines that trace dependencies.
func tracing() int { return poll.Goroutines("app.(*Observer).TraceDeps(") }

// waitTracing waits for want tracing goroutines.
func waitTracing(t *testing.T, want int, when string) {
	t.Helper()
	if !poll.Wait(10*time.Second, func() bool { return tracing() == want }) {
		t.Errorf("%s: %d dependency traces running, want %d", when, tracing(), want)
	}
}

// longPolls counts the snapshots requests parked waiting for the next
// snapshot.
func longPolls() int { return poll.Goroutines(" [select", "agent.(*handler).snapshots(") }

// openTestWatch opens a watch on a listener of this process.
func openTestWatch(t *testing.T, ws *watches, now time.Time) *watch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	l := evidence.Listener{Proto: "tcp", Addr: ln.Addr().String(), Port: port, PIDs: []int{os.Getpid()}}
	w, err := ws.open(context.Background(), []evidence.Listener{l}, port, "test", false, 0, now)
	if err != nil || w == nil {
		t.Fatalf("open watch: %v %v", w, err)
	}
	return w
}

// TestWatchTraceStops: a watch traces its servers' dependencies from its
// opening; the load's start begins the trace again and its end stops
// it; a watch that finishes, or expires, leaves no trace running.
func TestWatchTraceStops(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("dependency traces need sock_diag")
	}
	ws := newWatches(netns.NS{}, time.Minute, time.Second)
	now := time.Now()
	w := openTestWatch(t, ws, now)
	waitTracing(t, 1, "open")
	w.load(true)
	waitTracing(t, 1, "load start")
	w.load(false)
	waitTracing(t, 0, "load end")
	w.load(true)
	waitTracing(t, 1, "load start again")
	v := w.view(now, true, now)
	ws.finish(w)
	waitTracing(t, 0, "finish")
	if len(v.Servers) == 0 {
		t.Errorf("finished watch has no servers")
	}
	w.load(true) // a late request on a finished watch starts nothing
	waitTracing(t, 0, "load start after finish")

	w = openTestWatch(t, ws, now)
	waitTracing(t, 1, "second open")
	ws.sample(context.Background(), now.Add(agentapi.WatchTTL+time.Second))
	waitTracing(t, 0, "expiry")
	if ws.get(w.id, now.Add(agentapi.WatchTTL+time.Second)) != nil {
		t.Errorf("the idle watch did not expire")
	}
}
