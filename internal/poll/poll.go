// Package poll is how tests wait for something to happen — a server to
// listen, a counter to rise, a file to appear, a process to rename
// itself: by asking again until it has, with a deadline, never by
// sleeping for a time guessed on an idle machine. On a busy machine the
// wait is longer and the test still passes; the deadline only bounds
// how long a test that will fail takes to say so, so it is generous.
package poll

import (
	"bytes"
	"runtime"
	"testing"
	"time"
)

// Every is how often a condition is asked again: often enough that a
// wait ends soon after its condition holds, rarely enough to leave the
// CPU to what the test waits for.
const Every = 10 * time.Millisecond

// Until asks cond until it returns nil, and fails the test with the
// last error it returned if timeout passes first: that error says what
// was seen instead.
func Until(t testing.TB, timeout time.Duration, cond func() error) {
	t.Helper()
	UntilEvery(t, timeout, Every, cond)
}

// UntilEvery is Until asking every interval: for a server that limits
// how often it may be asked (the agent answers 20 requests a second).
func UntilEvery(t testing.TB, timeout, every time.Duration, cond func() error) {
	t.Helper()
	var err error
	if !WaitEvery(timeout, every, func() bool { err = cond(); return err == nil }) {
		t.Fatalf("not within %v: %v", timeout, err)
	}
}

// True asks cond until it holds, and fails the test, saying what it
// waited for, if timeout passes first.
func True(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Wait(timeout, cond) {
		t.Fatalf("not within %v: %s", timeout, what)
	}
}

// Wait asks cond until it holds or timeout passes, and says whether it
// held: for the helpers that report a failure their own way, and for
// goroutines other than the test's, which must not fail it.
func Wait(timeout time.Duration, cond func() bool) bool {
	return WaitEvery(timeout, Every, cond)
}

// WaitEvery is Wait asking every interval.
func WaitEvery(timeout, every time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return cond()
		}
		time.Sleep(every)
	}
}

// Goroutines counts this process's goroutines whose stack holds every
// one of parts (a function's name, a state such as " [select"): what a
// test waits for when the event is a goroutine being parked somewhere —
// a handler holding a request, a sampler held by a lock — or gone.
func Goroutines(parts ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		all := true
		for _, p := range parts {
			all = all && bytes.Contains(g, []byte(p))
		}
		if all {
			count++
		}
	}
	return count
}
