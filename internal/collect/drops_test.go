package collect

import (
	"context"
	"os"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// TestDropsUnavailable: without a monitor the snapshot says why, and the
// collector's status is unavailable with that reason: the rules then run
// on the counters.
func TestDropsUnavailable(t *testing.T) {
	var s evidence.Snapshot
	err := dropSource{why: "not root: loading BPF needs root, or CAP_BPF and CAP_PERFMON"}.read(1, &s)
	st := status("drops", err, 0)
	if s.Drops == nil || s.Drops.Unavailable != "not root: loading BPF needs root, or CAP_BPF and CAP_PERFMON" {
		t.Errorf("drops %+v", s.Drops)
	}
	if st.State != evidence.StateUnavailable || st.Error == "" {
		t.Errorf("status %+v", st)
	}
}

// TestDropsCollected: a Snapshotter that asks for drops has them in
// every snapshot, next to the counters, or the reason it has none; and
// one that does not ask has neither.
func TestDropsCollected(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the drop monitor needs root; without it the reason is tested by TestDropsUnavailable")
	}
	s, err := New(Config{Drops: true})
	if err != nil {
		t.Fatal(err)
	}
	snap := s.Snapshot(context.Background())
	s.Close()
	if snap.Drops == nil {
		t.Fatal("no drops in the snapshot")
	}
	if len(snap.Status) < 2 || snap.Status[1].Collector != "drops" {
		t.Errorf("the drops collector is not next to the counters: %+v", snap.Status)
	}
	if snap.Drops.Unavailable == "" && snap.Drops.Since.IsZero() {
		t.Errorf("counted drops without a start: %+v", snap.Drops)
	}
	s, err = New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if snap := s.Snapshot(context.Background()); snap.Drops != nil {
		t.Errorf("drops not asked for, yet collected")
	}
}
