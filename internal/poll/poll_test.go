package poll

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// TestWait: a condition that comes true is seen; one that never does
// ends the wait at its deadline, with the condition asked one last time.
func TestWait(t *testing.T) {
	var n atomic.Int32
	if !Wait(time.Minute, func() bool { return n.Add(1) == 3 }) {
		t.Error("Wait gave up on a condition that came true")
	}
	asked := 0
	if Wait(3*Every, func() bool { asked++; return false }) {
		t.Error("Wait said a condition that never held did")
	}
	if asked < 2 {
		t.Errorf("condition asked %d times in 3 intervals", asked)
	}
}

// TestUntil: the test fails with the condition's last word.
func TestUntil(t *testing.T) {
	ft := &fakeT{TB: t}
	Until(ft, Every, func() error { return errors.New("still 3 of 4") })
	if ft.msg != "not within 10ms: still 3 of 4" {
		t.Errorf("failed with %q", ft.msg)
	}
	ft = &fakeT{TB: t}
	True(ft, time.Minute, "nothing", func() bool { return true })
	if ft.msg != "" {
		t.Errorf("a condition that held failed the test: %q", ft.msg)
	}
}

// fakeT records Fatalf instead of ending the test.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
}

// TestGoroutines: a goroutine parked in a function is counted while it
// is, and not once it returned.
func TestGoroutines(t *testing.T) {
	release := make(chan struct{})
	done := make(chan struct{})
	go func() { parkedForTest(release); close(done) }()
	True(t, time.Minute, "the goroutine parked", func() bool { return Goroutines("poll.parkedForTest(", " [chan receive") == 1 })
	if n := Goroutines("poll.parkedForTest(", "no such frame"); n != 0 {
		t.Errorf("%d goroutines hold a frame none has", n)
	}
	close(release)
	<-done
	True(t, time.Minute, "the goroutine gone", func() bool { return Goroutines("poll.parkedForTest(") == 0 })
}

//go:noinline
func parkedForTest(release chan struct{}) { <-release }
