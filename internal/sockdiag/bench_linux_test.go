package sockdiag

import (
	"net"
	"os"
	"strconv"
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

// BenchmarkQuery measures one round of a dependency trace: tcp_info of
// 4 and of 256 (MaxTracedConns) connections by exact lookup, among
// ND_BENCH_FILL more idle loopback connections (default none) to show
// that the cost does not grow with the socket table.
func BenchmarkQuery(b *testing.B) {
	fill, _ := strconv.Atoi(os.Getenv("ND_BENCH_FILL"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	var ids []SockID
	for i := range 256 + fill {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
		if i < 256 {
			ids = append(ids, SockID{Local: c.LocalAddr().(*net.TCPAddr).AddrPort(), Remote: c.RemoteAddr().(*net.TCPAddr).AddrPort()})
		}
	}
	q, err := NewQuerier()
	if err != nil {
		b.Fatal(err)
	}
	defer q.Close()
	for _, n := range []int{4, 256} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			got := 0
			for b.Loop() {
				got = 0
				if err := q.Query(ids[:n], func(int, *InetDiagMsg, *TCPInfo) { got++ }); err != nil {
					b.Fatal(err)
				}
			}
			if got != n {
				b.Fatalf("%d answers for %d connections", got, n)
			}
		})
	}
}

// BenchmarkEstablishedDump measures the dump of every non-listening TCP
// socket with and without INET_DIAG_SKMEMINFO (each socket's drops and
// buffer), over 2000 loopback connections of its own (4000 sockets)
// besides the host's: what asking every socket for its drops costs.
func BenchmarkEstablishedDump(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	for range 2000 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		defer c.Close()
	}
	states := allStates &^ listenBits
	for _, bm := range []struct {
		name string
		ext  uint8
	}{{"plain", 0}, {"skmeminfo", memExt}} {
		b.Run(bm.name, func(b *testing.B) {
			n := 0
			for b.Loop() {
				c, err := open()
				if err != nil {
					b.Fatal(err)
				}
				if err := c.request(tcpDiagGetSock, compatRequest(states, bm.ext)); err != nil {
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
			b.ReportMetric(float64(n), "sockets")
		})
	}
}
