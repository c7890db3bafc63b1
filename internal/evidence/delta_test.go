package evidence

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func snap(t0 time.Time, sec int, v uint64) Snapshot {
	return Snapshot{Time: t0.Add(time.Duration(sec) * time.Second), Counters: map[string]uint64{"TcpExt.ListenOverflows": v}}
}

func TestWindowAndSeries(t *testing.T) {
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
	want := []float64{30, 0, 20}
	if diff := cmp.Diff(want, b.Series("TcpExt.ListenOverflows")); diff != "" {
		t.Errorf("Series() mismatch (-want +got):\n%s", diff)
	}
	if got := (&Bundle{Snapshots: b.Snapshots[:1]}).Series("x"); got != nil {
		t.Errorf("Series of one snapshot = %v, want nil", got)
	}
}
