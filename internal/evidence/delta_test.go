package evidence

import (
	"testing"
	"time"
)

func snap(t0 time.Time, sec int, v uint64) Snapshot {
	return Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Counters: map[string]uint64{"TcpExt.ListenOverflows": v}}
}

func TestWindow(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	b := &Bundle{Snapshots: []Snapshot{snap(t0, 0, 100), snap(t0, 1, 130), snap(t0, 2, 10), snap(t0, 4, 50)}}
	w, ok := b.Window()
	if !ok {
		t.Fatal("no window over 4 snapshots")
	}
	// 100 → 50 went down overall (a reset): no rise is claimed.
	if d, ok := w.Counter("TcpExt.ListenOverflows"); d != 0 || !ok {
		t.Errorf("Counter over a reset = %d, %v; want 0, true", d, ok)
	}
	if _, ok := w.Counter("Tcp.Missing"); ok {
		t.Errorf("Counter of a missing name reported ok")
	}
	if got := w.Rate("TcpExt.ListenOverflows"); got != 0 {
		t.Errorf("Rate over a reset = %v, want 0", got)
	}
	if _, ok := (&Bundle{Snapshots: b.Snapshots[:1]}).Window(); ok {
		t.Errorf("a window over one snapshot")
	}
	step := Window{First: &b.Snapshots[0], Last: &b.Snapshots[1]}
	if got := step.Rate("TcpExt.ListenOverflows"); got != 30 {
		t.Errorf("Rate over 1 s = %v, want 30", got)
	}
}

func TestSourceRate(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	a, b := snap(t0, 0, 10), snap(t0, 2, 30)
	a.Conntrack = &Conntrack{Stats: map[string]uint64{"drop": 5}}
	b.Conntrack = &Conntrack{Stats: map[string]uint64{"drop": 405}}
	w := Window{First: &a, Last: &b}
	for src, want := range map[string]float64{"TcpExt.ListenOverflows": 10, "conntrack.drop": 200, "conntrack.early_drop": 0, "Tcp.Missing": 0} {
		if got := w.SourceRate(src); got != want {
			t.Errorf("SourceRate(%q) = %v, want %v", src, got, want)
		}
	}
}
