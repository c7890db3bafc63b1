package load

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRamp: connections step up from FROM to TO over the ramp.
func TestRamp(t *testing.T) {
	oneEngine(t, EngineEpoll, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		res := mustRun(t, Options{Engine: eng, URL: s.URL, Ramp: &Ramp{From: 2, To: 8, Over: 3 * time.Second}, Duration: 4 * time.Second, Threads: 2})
		if len(res.Timeline) < 4 {
			t.Fatalf("timeline has %d seconds", len(res.Timeline))
		}
		first, last := res.Timeline[0].OpenConns, res.Timeline[len(res.Timeline)-1].OpenConns
		if first > 4 || last != 8 || s.conns.Load() != 8 {
			t.Errorf("open connections %d at first, %d at last, server saw %d; want ≤4 rising to 8", first, last, s.conns.Load())
		}
		for i := 1; i < len(res.Timeline); i++ {
			if res.Timeline[i].OpenConns < res.Timeline[i-1].OpenConns {
				t.Errorf("connections fell from %d to %d in second %d", res.Timeline[i-1].OpenConns, res.Timeline[i].OpenConns, i)
			}
		}
	})
}

func TestParseRamp(t *testing.T) {
	r, err := ParseRamp("10:1000:30s")
	if err != nil || r.From != 10 || r.To != 1000 || r.Over != 30*time.Second {
		t.Errorf("ParseRamp = %+v, %v", r, err)
	}
	for _, bad := range []string{"10:1000", "0:10:1s", "10:5:1s", "1:10:10", "a:b:1s", "1:10:-1s"} {
		if _, err := ParseRamp(bad); err == nil {
			t.Errorf("ParseRamp(%q) accepted", bad)
		}
	}
}

// TestNofileClamp: more connections than descriptors are clamped, said
// and marked as limiting the result.
func TestNofileClamp(t *testing.T) {
	n, note := raiseNofile(1 << 30)
	if n >= 1<<30 || !strings.Contains(note, "exceeds the open-file limit") {
		t.Errorf("raiseNofile(1<<30) = %d, %q", n, note)
	}
	if n, note := raiseNofile(10); n != 10 || note != "" {
		t.Errorf("raiseNofile(10) = %d, %q", n, note)
	}
}

// TestJudge: the generator blames itself when its threads were busy, or
// it ran out of descriptors or local ports, and not otherwise.
func TestJudge(t *testing.T) {
	e := &engine{opts: Options{Rate: 1000}}
	tests := []struct {
		res  Result
		want string
	}{
		{Result{Self: Self{ThreadBusy: []float64{0.3, 0.4}}, RPS: 1000, Elapsed: 5 * time.Second}, ""},
		{Result{Self: Self{ThreadBusy: []float64{0.97, 0.5}}, RPS: 1000, Elapsed: 5 * time.Second}, "thread 0 was on CPU 97%"},
		{Result{Self: Self{ThreadBusy: []float64{0.1}}, ErrorCauses: map[string]uint64{"no-local-port": 7}, RPS: 1000, Elapsed: 5 * time.Second}, "lack of a local port"},
		{Result{Self: Self{ThreadBusy: []float64{0.1}}, ErrorCauses: map[string]uint64{"fd-limit": 3}, RPS: 1000, Elapsed: 5 * time.Second}, "file descriptors"},
		{Result{Self: Self{ThreadBusy: []float64{0.8}}, RPS: 600, Elapsed: 5 * time.Second}, "sent 600 req/s of the 1000"},
	}
	for _, tt := range tests {
		r := tt.res
		e.judge(&r)
		got := strings.Join(r.SaturatedBy, "; ")
		if (tt.want == "") != !r.Saturated || !strings.Contains(got, tt.want) {
			t.Errorf("judge(%+v): saturated %v by %q, want %q", tt.res.Self, r.Saturated, got, tt.want)
		}
	}
	if c := connectCause(syscall.EADDRNOTAVAIL); c != "no-local-port" {
		t.Errorf("EADDRNOTAVAIL cause = %q", c)
	}
}

// TestBusyThreadMeasured: a thread pushing a fast local server spends a
// measurable share of its time on CPU, reported per thread.
func TestBusyThreadMeasured(t *testing.T) {
	eachEngine(t, func(t *testing.T, eng Engine) {
		s := newCounting(t, nil)
		res, err := Run(context.Background(), Options{Engine: eng, URL: s.URL, Duration: time.Second, Connections: 4, Threads: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Self.ThreadBusy) != 1 || res.Self.ThreadBusy[0] <= 0.01 || res.Self.CPUSeconds <= 0 || res.Self.CPUPerRequest <= 0 {
			t.Errorf("self = %+v", res.Self)
		}
	})
}

// TestCapacity: before a load, more connections than the descriptors
// allow are clamped and said, in one line each; as many as fit are
// said nothing about.
func TestCapacity(t *testing.T) {
	n, notes := Capacity(1 << 30)
	if n >= 1<<30 || len(notes) == 0 || !strings.Contains(notes[0], "exceeds the open-file limit") {
		t.Errorf("Capacity(1<<30) = %d, %q", n, notes)
	}
	if n, notes := Capacity(10); n != 10 || len(notes) != 0 {
		t.Errorf("Capacity(10) = %d, %q", n, notes)
	}
}
