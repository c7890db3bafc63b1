package pace

import (
	"context"
	"testing"
	"time"
)

// TestLattice: ticks fall on the lattice aligned to the start; a loop
// that overran gets the latest tick due at once, the ones before it
// dropped and counted, and the next tick is on the lattice again (not
// a burst of the missed ones, not a lattice moved to the late tick).
func TestLattice(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	s := time.Second
	tk := NewAt(t0, s)
	steps := []struct {
		now             time.Duration // when the loop asks for the tick
		n, missed       int
		late, nextDueIn time.Duration
	}{
		{0, 0, 0, 0, s}, // the first tick is due at the start
		{s + time.Millisecond, 1, 0, time.Millisecond, 2 * s}, // on time (a timer's latency)
		{3*s + 500*time.Millisecond, 3, 1, 500 * time.Millisecond, 4 * s},
		{4 * s, 4, 0, 0, 5 * s}, // back on the lattice
		{9*s + 900*time.Millisecond, 9, 4, 900 * time.Millisecond, 10 * s},
	}
	for i, st := range steps {
		got := tk.fire(t0.Add(st.now))
		if got.N != st.n || got.Missed != st.missed || got.Late() != st.late || !got.Due.Equal(t0.Add(time.Duration(st.n)*s)) {
			t.Errorf("step %d at +%v: tick %+v (late %v), want N %d, missed %d, late %v", i, st.now, got, got.Late(), st.n, st.missed, st.late)
		}
		if due := tk.Due(); !due.Equal(t0.Add(st.nextDueIn)) {
			t.Errorf("step %d: next tick due at +%v, want +%v", i, due.Sub(t0), st.nextDueIn)
		}
	}
}

// TestNext: ticks come in order on the lattice, and none once the
// context has ended, even one already due.
func TestNext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	tk := New(time.Millisecond)
	start := tk.Due()
	last := -1
	for range 5 {
		got, ok := tk.Next(ctx)
		if !ok {
			t.Fatal("a tick refused before the context ended")
		}
		if got.N <= last || got.At.Before(got.Due) || !got.Due.Equal(start.Add(time.Duration(got.N)*time.Millisecond)) {
			t.Fatalf("tick %+v after tick %d", got, last)
		}
		last = got.N
	}
	cancel()
	if got, ok := tk.Next(ctx); ok {
		t.Errorf("a tick after the context ended: %+v", got)
	}
	// A lattice far behind: its tick is due, the context still decides.
	behind := NewAt(time.Now().Add(-time.Hour), time.Minute)
	if _, ok := behind.Next(ctx); ok {
		t.Error("a due tick given after the context ended")
	}
}

// TestEvery: the loop's body runs each tick until it breaks out or the
// context ends.
func TestEvery(t *testing.T) {
	n := 0
	for tk := range Every(context.Background(), time.Millisecond) {
		if tk.N < n {
			t.Fatalf("tick %d after %d ticks", tk.N, n)
		}
		n++
		if n == 3 {
			break
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n = 0
	for range Every(ctx, time.Hour) {
		n++
		cancel() // the next tick, an hour away, is not waited for
	}
	if n != 1 {
		t.Errorf("%d ticks of an hour's interval before the cancel ended it, want the first alone", n)
	}
}

// TestUntil: a time past returns at once; a cancelled context ends the
// wait.
func TestUntil(t *testing.T) {
	if !Until(context.Background(), time.Now().Add(-time.Second)) {
		t.Error("a time past was not reached")
	}
	if !Sleep(context.Background(), time.Millisecond) {
		t.Error("a millisecond did not pass")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if Sleep(ctx, time.Hour) {
		t.Error("an hour passed on a cancelled context")
	}
	if Until(ctx, time.Now().Add(-time.Second)) {
		t.Error("a cancelled context reached a time past")
	}
}
