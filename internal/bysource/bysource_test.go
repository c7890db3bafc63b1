package bysource

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

func TestOf(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.2:5000":           "10.0.0.2/32",
		"[::ffff:10.0.0.2]:80":    "10.0.0.2/32",
		"[2001:db8:1:2:3::4]:443": "2001:db8:1:2::/64",
		"2001:db8:1:2:ffff::1":    "2001:db8:1:2::/64",
		"[fe80::1%eth0]:80":       "fe80::/64",
	} {
		if got := Of(in).String(); got != want {
			t.Errorf("Of(%q) = %s, want %s", in, got, want)
		}
	}
}

// TestFailures: a source that used its failures is blocked (whatever it
// presents next) until its bucket refills; other sources are not.
func TestFailures(t *testing.T) {
	f := NewFailures(2, 10, 100)
	now := time.Unix(1000, 0)
	for i := range 10 {
		if f.Blocked("10.0.0.2:1", now) {
			t.Fatalf("blocked after %d failures", i)
		}
		f.Fail("10.0.0.2:1", now)
	}
	if !f.Blocked("10.0.0.2:2", now) {
		t.Fatal("not blocked after 10 failures")
	}
	if !f.Blocked("[::ffff:10.0.0.2]:3", now) {
		t.Fatal("the same address mapped into IPv6 is not blocked")
	}
	if f.Blocked("10.0.0.3:1", now) {
		t.Fatal("another source blocked")
	}
	if f.Blocked("10.0.0.2:1", now.Add(500*time.Millisecond)) {
		t.Fatal("still blocked once a failure is allowed again (2 a second)")
	}
	// An IPv6 client walking its /64 is one source.
	for i := range 10 {
		f.Fail(fmt.Sprintf("[2001:db8::%x]:1", i+1), now)
	}
	if !f.Blocked("[2001:db8::ffff]:9", now) {
		t.Fatal("a /64 not blocked as one source")
	}
}

// TestFailuresBounded: the table forgets sources, never grows past max.
func TestFailuresBounded(t *testing.T) {
	f := NewFailures(2, 10, 8)
	now := time.Unix(1000, 0)
	for i := range 100 {
		f.Fail(fmt.Sprintf("10.0.%d.%d:1", i/256, i%256), now.Add(time.Duration(i)*time.Millisecond))
	}
	if len(f.src) > 8 {
		t.Fatalf("%d sources tracked, max 8", len(f.src))
	}
}

// TestSlots: silent connections from a few sources fill every slot; a
// newcomer still gets one, taken from the source holding the most, whose
// connection is evicted; one source never holds more than its share.
func TestSlots(t *testing.T) {
	s := NewSlots(32, 8)
	evicted := map[string]int{}
	var held []*Slot
	for src := range 4 {
		for i := range 9 {
			addr := fmt.Sprintf("192.0.2.%d:%d", src+1, 1000+i)
			sl := s.Acquire(addr, func() { evicted[Of(addr).String()]++ })
			if i == 8 {
				if sl != nil {
					t.Fatalf("source %d got a 9th slot", src)
				}
				continue
			}
			if sl == nil {
				t.Fatalf("source %d refused its slot %d", src, i)
			}
			held = append(held, sl)
		}
	}
	if s.Held() != 32 {
		t.Fatalf("%d held, want 32", s.Held())
	}
	// The token holder, from a fifth address.
	mine := s.Acquire("198.51.100.7:5555", nil)
	if mine == nil {
		t.Fatal("the newcomer was locked out by silent connections")
	}
	if n := len(evicted); n != 1 || s.Held() != 32 {
		t.Fatalf("evicted %v, held %d", evicted, s.Held())
	}
	// Evicted slots are released by their handler, once or twice.
	for _, sl := range held {
		sl.Release()
		sl.Release()
	}
	mine.Release()
	if s.Held() != 0 {
		t.Fatalf("%d held after every release", s.Held())
	}
	// Many sources holding one slot each: a newcomer takes the oldest,
	// whatever it holds, and the next newcomer the next oldest.
	s = NewSlots(32, 8)
	var order []string
	for i := range 32 {
		addr := fmt.Sprintf("192.0.2.%d:1", i+1)
		if s.Acquire(addr, func() { order = append(order, addr) }) == nil {
			t.Fatalf("source %d refused", i)
		}
	}
	for i := range 3 {
		if s.Acquire(fmt.Sprintf("198.51.100.%d:1", i+1), nil) == nil {
			t.Fatalf("newcomer %d locked out by 32 sources holding one slot each", i)
		}
	}
	if want := []string{"192.0.2.1:1", "192.0.2.2:1", "192.0.2.3:1"}; !slices.Equal(order, want) || s.Held() != 32 {
		t.Fatalf("evicted %v, want the oldest %v; %d held", order, want, s.Held())
	}
	// Never its own source's: one source holding every slot keeps them.
	s = NewSlots(2, 2)
	s.Acquire("192.0.2.1:1", nil)
	s.Acquire("192.0.2.1:2", nil)
	if s.Acquire("192.0.2.1:3", nil) != nil {
		t.Fatal("a source past its share")
	}
}
