package sockdiag

import (
	"os"
	"testing"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// BenchmarkCollect dumps the socket table of NETDOCTOR_BENCH_NETNS (or the
// current namespace). bench/snapshot.sh fills that namespace with sockets.
func BenchmarkCollect(b *testing.B) {
	path, err := netns.Resolve(os.Getenv("NETDOCTOR_BENCH_NETNS"))
	if err != nil {
		b.Fatal(err)
	}
	var n int
	for b.Loop() {
		err := netns.Do(path, func() error {
			s, err := Collect(Options{PortLow: 32768, PortHigh: 60999, Unix: true, CurrEstab: 100000, HaveCurrEstab: true})
			if s != nil {
				n = 0
				for _, c := range s.TCP {
					n += c
				}
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n), "sockets")
}
