package sockdiag

import (
	"testing"
)

// BenchmarkListenDump measures the LISTEN-only dump with and without
// INET_DIAG_SKMEMINFO, over 1000 listeners of its own besides the host's.
func BenchmarkListenDump(b *testing.B) {
	for range 1000 {
		listenBacklog(b, 1)
	}
	for _, bm := range []struct {
		name string
		ext  uint8
	}{{"plain", 0}, {"skmeminfo", listenExt}} {
		b.Run(bm.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				c, err := open()
				if err != nil {
					b.Fatal(err)
				}
				if err := c.request(tcpDiagGetSock, compatRequest(listenBits, bm.ext)); err != nil {
					b.Fatal(err)
				}
				var m InetDiagMsg
				n = 0
				if err := c.receive(func(p []byte) error {
					n++
					return DecodeInetDiagMsg(p, &m)
				}); err != nil {
					b.Fatal(err)
				}
				c.close()
			}
			b.ReportMetric(float64(n), "listeners")
		})
	}
}
