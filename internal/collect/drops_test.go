package collect

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// TestDropsUnavailable: without a monitor the snapshot says why, and the
// collector's status is unavailable with that reason: the rules then run
// on the counters.
func TestDropsUnavailable(t *testing.T) {
	var s evidence.Snapshot
	err := dropsCollector{dm: dropSource{why: "not root: loading BPF needs root, or CAP_BPF and CAP_PERFMON"}, ino: 1}.Collect(context.Background(), &s)
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
	var order []string
	for _, st := range snap.Status {
		order = append(order, st.Collector)
	}
	// The counters rates are taken from first, at the snapshot's time;
	// the drop monitor's maps read next to the kernel's counters.
	if want := []string{"counters", "drops", "softnet", "cpu", "interfaces"}; len(order) < len(want) || !slices.Equal(order[:len(want)], want) {
		t.Errorf("collectors ran %q, want %q first", order, want)
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

// stage is a collector that records when it runs; as a stagedStage, its
// finish runs after the others and fails with err.
type stage struct {
	name  string
	order *[]string
	err   error
}

func (c stage) Name() string { return c.name }

func (c stage) Collect(_ context.Context, _ *evidence.Snapshot) error {
	*c.order = append(*c.order, c.name)
	return nil
}

type stagedStage struct{ stage }

func (c stagedStage) Read(_ context.Context, _ *evidence.Snapshot) (func() error, error) {
	*c.order = append(*c.order, c.name+" read")
	return func() error {
		*c.order = append(*c.order, c.name+" finish")
		return c.err
	}, nil
}

// TestStagedCollector: a staged collector's slow part runs after every
// other collector, so that theirs are read at the snapshot's time, and
// its status keeps its place and says how the finish went.
func TestStagedCollector(t *testing.T) {
	var order []string
	s := &Snapshotter{collectors: []Collector{
		stage{name: "counters", order: &order},
		stagedStage{stage{name: "drops", order: &order, err: partial{errors.New("table full")}}},
		stage{name: "interfaces", order: &order},
	}}
	snap := s.Snapshot(context.Background())
	if want := []string{"counters", "drops read", "interfaces", "drops finish"}; !slices.Equal(order, want) {
		t.Errorf("ran %q, want %q", order, want)
	}
	var names []string
	for _, st := range snap.Status {
		names = append(names, st.Collector)
	}
	if !slices.Equal(names, []string{"counters", "drops", "interfaces"}) {
		t.Errorf("statuses %q", names)
	}
	if st := snap.Status[1]; st.State != evidence.StatePartial || st.Error != "table full" {
		t.Errorf("the finished collector's status %+v, want partial: table full", st)
	}
}
