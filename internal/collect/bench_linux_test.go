package collect

import (
	"context"
	"os"
	"testing"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// BenchmarkSnapshot takes full snapshots of NETDOCTOR_BENCH_NETNS (or the
// current namespace), as the 1 Hz sampler does after its first snapshot.
// bench/snapshot.sh fills that namespace with 100k sockets first.
func BenchmarkSnapshot(b *testing.B) {
	ns, err := netns.Resolve(os.Getenv("NETDOCTOR_BENCH_NETNS"))
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(Config{NetNS: ns})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	snap := s.Snapshot(ctx) // the first one resolves listener owners
	for b.Loop() {
		snap = s.Snapshot(ctx)
	}
	for _, st := range snap.Status {
		if st.State != "ok" {
			b.Logf("collector %s: %s %s", st.Collector, st.State, st.Error)
		}
	}
	if snap.Sockets != nil {
		n := 0
		for _, c := range snap.Sockets.TCP {
			n += c
		}
		b.ReportMetric(float64(n), "sockets")
	}
}
