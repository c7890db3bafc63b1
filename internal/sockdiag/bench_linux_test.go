package sockdiag

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
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

// benchConns opens n loopback connections (2n sockets) in namespace
// ns, held until the benchmark ends.
func benchConns(b *testing.B, do func(func() error) error, n int) {
	b.Helper()
	var ln net.Listener
	if err := do(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:7020")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ln.Close() })
	var mu sync.Mutex
	var held []net.Conn
	b.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	}()
	if err := do(func() error {
		for range n {
			c, err := net.Dial("tcp", "127.0.0.1:7020")
			if err != nil {
				return err
			}
			b.Cleanup(func() { c.Close() })
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkSenders is one snapshot's walk of a namespace's sockets, in
// a namespace of its own with ND_BENCH_CONNS loopback connections
// (default 2000: 4000 sockets): "before", the counts as Collect made
// them (every socket's state and SKMEMINFO); "senders", the same walk
// asking every connection's tcp_info and congestion control too, with
// the accounting of a Senders across snapshots; "ss", `ss -tinm` (every
// connection's tcp_info and memory, printed) as the reference, through
// nsenter. At 1 Hz a snapshot's time is its share of one core.
func BenchmarkSenders(b *testing.B) {
	n := 2000
	if v, err := strconv.Atoi(os.Getenv("ND_BENCH_CONNS")); err == nil && v > 0 {
		n = v
	}
	ns := newNetns(b, "bench")
	benchConns(b, ns.Do, n)
	s := NewSenders()
	for _, bm := range []struct {
		name string
		run  func() error
	}{
		{"before", func() error { _, err := Collect(Options{}); return err }},
		{"senders", func() error {
			_, sd, err := CollectSenders(Options{Senders: s, SendersAt: time.Now(), SlowStartAfterIdle: 1})
			if err == nil && (len(sd.Listeners) != 1 || sd.Listeners[0].Open != n) {
				return fmt.Errorf("accounted %+v, want %d open on one listener", sd.Listeners, n)
			}
			return err
		}},
		{"ss", func() error {
			return exec.Command("nsenter", "--net="+ns.Path, "ss", "-tinm").Run()
		}},
	} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				if err := ns.Do(bm.run); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e7, "%core@1Hz")
		})
	}
}

// BenchmarkEnds is the cost of the kernel's notices of connections'
// ends: a loopback connection opened and closed at a time in a
// namespace of its own, without a watcher, and with one reading every
// notice into a Senders. The notices are made on a kernel worker, not
// on the benchmark's thread: the metric "cpu-us/conn" is the host's CPU
// time (/proc/stat, all CPUs) per connection.
func BenchmarkEnds(b *testing.B) {
	ns := newNetns(b, "ends")
	var ln net.Listener
	if err := ns.Do(func() error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:7030")
		return err
	}); err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, watch := range []bool{false, true} {
		name := "unwatched"
		if watch {
			name = "watched"
		}
		b.Run(name, func(b *testing.B) {
			s := NewSenders()
			if watch {
				var e *Ends
				if err := ns.Do(func() error { var err error; e, err = WatchEnds(s); return err }); err != nil {
					b.Fatal(err)
				}
				defer e.Close()
			}
			busy0 := hostBusy(b)
			for b.Loop() {
				if err := ns.Do(func() error {
					c, err := net.Dial("tcp", "127.0.0.1:7030")
					if err != nil {
						return err
					}
					return c.Close()
				}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64((hostBusy(b)-busy0).Microseconds())/float64(b.N), "cpu-us/conn")
		})
	}
}

// hostBusy is the time all CPUs spent not idle, from /proc/stat.
func hostBusy(b *testing.B) time.Duration {
	b.Helper()
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(strings.SplitN(string(raw), "\n", 2)[0])
	var busy uint64
	for i, v := range f[1:] {
		x, _ := strconv.ParseUint(v, 10, 64)
		if i != 3 && i != 4 { // idle, iowait
			busy += x
		}
	}
	return time.Duration(busy) * 10 * time.Millisecond
}
