package dropmon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	vnetlink "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/poll"
)

// The drop monitor's cost (bench/README.md, bench/drops.sh): per drop,
// against nothing attached and against bpftrace counting the same
// tracepoint by reason (the reference tool a user would reach for), in
// the same run, alternating; sustained at 100 000 drops a second; and
// reading the counts, what each snapshot pays.

// benchNetns makes a namespace with lo up for the drops, so that the
// host's own traffic is not in them and theirs not on the host's.
func benchNetns(b *testing.B) netns.NS {
	b.Helper()
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	name := fmt.Sprintf("ndbench-drops-%d", os.Getpid())
	n, err := netns.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := netns.Delete(name); err != nil && !errors.Is(err, netns.ErrNotFound) {
			b.Error(err)
		}
	})
	if err := n.Do(func() error {
		lo, err := vnetlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return vnetlink.LinkSetUp(lo)
	}); err != nil {
		b.Fatal(err)
	}
	return n
}

// sender sends datagrams from inside n to a port nothing listens on: the
// kernel drops each (NO_SOCKET) in the sender's own system call.
type sender struct {
	fd int
	to unix.Sockaddr
}

func newSender(b *testing.B, n netns.NS) *sender {
	b.Helper()
	s := &sender{to: &unix.SockaddrInet4{Port: 9, Addr: [4]byte{127, 0, 0, 1}}}
	// The socket belongs to the namespace it is made in; sending from
	// any thread afterwards stays there.
	if err := n.Do(func() error {
		var err error
		s.fd, err = unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
		return err
	}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(s.fd) })
	return s
}

func (s *sender) send() { _ = unix.Sendto(s.fd, []byte("x"), 0, s.to) }

// bpfStats sums the run time and runs of programs.
func bpfStats(progs []*ebpf.Program) (time.Duration, uint64) {
	var rt time.Duration
	var n uint64
	for _, p := range progs {
		if st, err := p.Stats(); err == nil {
			rt += st.Runtime
			n += st.RunCount
		}
	}
	return rt, n
}

func (m *Monitor) programs() []*ebpf.Program {
	var out []*ebpf.Program
	for _, p := range m.coll.Programs {
		out = append(out, p)
	}
	return out
}

// progIDs are the BPF programs loaded on the host.
func progIDs() map[ebpf.ProgramID]bool {
	out := map[ebpf.ProgramID]bool{}
	for id := ebpf.ProgramID(0); ; {
		next, err := ebpf.ProgramGetNextID(id)
		if err != nil {
			return out
		}
		out[next], id = true, next
	}
}

// startBpftrace starts bpftrace counting kfree_skb by reason and returns
// its programs once attached, or skips.
func startBpftrace(b *testing.B) []*ebpf.Program {
	b.Helper()
	path, err := exec.LookPath("bpftrace")
	if err != nil {
		b.Skip("bpftrace not installed (apt-get install bpftrace): no reference")
	}
	before := progIDs()
	cmd := exec.Command(path, "-e", "tracepoint:skb:kfree_skb { @[args->reason] = count(); }")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		// bpftrace may not end on SIGINT while it prints its maps:
		// a deadline, then SIGKILL.
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			cmd.Process.Kill()
			<-done
		}
	})
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	if !strings.HasPrefix(line, "Attaching") {
		b.Fatalf("bpftrace: %q %v", line, err)
	}
	go io.Copy(io.Discard, r) // never block its output
	// "Attaching 1 probe..." comes before the attachment ends: wait for
	// its program to be there.
	var progs []*ebpf.Program
	poll.True(b, 10*time.Second, "bpftrace's program loaded", func() bool {
		for id := range progIDs() {
			if !before[id] {
				if p, err := ebpf.NewProgramFromID(id); err == nil {
					b.Cleanup(func() { p.Close() })
					progs = append(progs, p)
				}
			}
		}
		return len(progs) > 0
	})
	return progs
}

// BenchmarkDrop is one dropped datagram (sendto, the kernel's receive
// path, the drop), with nothing on the tracepoint, with the drop monitor
// and with bpftrace. bpf-ns/drop is the kernel's own count of the time
// the attached program ran, per run (BPF_ENABLE_STATS, held only for
// the benchmark).
func BenchmarkDrop(b *testing.B) {
	n := benchNetns(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("no BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	for _, mode := range []string{"none", "dropmon", "bpftrace"} {
		b.Run(mode, func(b *testing.B) {
			s := newSender(b, n)
			var progs []*ebpf.Program
			switch mode {
			case "dropmon":
				m, err := Start()
				if err != nil {
					b.Skip(err)
				}
				defer m.Close()
				progs = m.programs()
			case "bpftrace":
				progs = startBpftrace(b)
			}
			rt0, n0 := bpfStats(progs)
			b.ResetTimer()
			for b.Loop() {
				s.send()
			}
			b.StopTimer()
			if rt, runs := bpfStats(progs); runs > n0 {
				b.ReportMetric(float64(rt-rt0)/float64(runs-n0), "bpf-ns/drop")
			}
		})
	}
}

// BenchmarkSustained drops 100 000 datagrams a second for a second per
// iteration (-benchtime=5x: 5 s) with the monitor attached, and reports
// the CPU its programs took (bpf-cpu-%, of one core) and what reading its
// counts once a second took (read-cpu-%), as a snapshot does. In
// dropmon-flows every datagram goes to another port (32768 of them in
// turn): a new flow for the ledger each time, which its LRU table must
// make room for (the flood a port scan, or a user's connections to
// nowhere, would be).
func BenchmarkSustained(b *testing.B) {
	n := benchNetns(b)
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	if err != nil {
		b.Skipf("no BPF run-time statistics: %v", err)
	}
	defer stats.Close()
	for _, mode := range []string{"dropmon", "dropmon-flows", "bpftrace"} {
		b.Run(mode, func(b *testing.B) {
			s := newSender(b, n)
			var m *Monitor
			var progs []*ebpf.Program
			if mode != "bpftrace" {
				if m, err = Start(); err != nil {
					b.Skip(err)
				}
				defer m.Close()
				progs = m.programs()
			} else {
				progs = startBpftrace(b)
			}
			ino := uint64(0)
			n.Do(func() error { ino, _ = netns.Inode(""); return nil })
			if m != nil {
				// The drops' functions are named once, at the first
				// read that sees them (a scan of /proc/kallsyms): not
				// a cost of every second.
				for range 100 {
					s.send()
				}
				namespace(m, ino)
			}
			port := 0
			send := s.send
			if mode == "dropmon-flows" {
				send = func() {
					s.to = &unix.SockaddrInet4{Port: 20000 + port%32768, Addr: [4]byte{127, 0, 0, 1}}
					port++
					s.send()
				}
			}
			rt0, _ := bpfStats(progs)
			var read time.Duration
			start := time.Now()
			for i := 0; b.Loop(); i++ {
				// 100 datagrams every millisecond, the next batch
				// due by the clock: a rate, not as fast as possible.
				t0 := time.Now()
				for k := range 1000 {
					for range 100 {
						send()
					}
					if d := time.Until(t0.Add(time.Duration(k+1) * time.Millisecond)); d > 0 {
						time.Sleep(d) // the benchmark's rate: the next batch's time
					}
				}
				if m != nil {
					r := time.Now()
					m.last = nil // a fresh read, as a snapshot a second later makes
					namespace(m, ino)
					read += time.Since(r)
				}
			}
			el := time.Since(start)
			rt, _ := bpfStats(progs)
			b.ReportMetric(100*float64(rt-rt0)/float64(el), "bpf-cpu-%")
			if m != nil {
				b.ReportMetric(100*float64(read)/float64(el), "read-cpu-%")
			}
		})
	}
}

// BenchmarkNamespace is what a snapshot pays to read the counts: the
// maps read in batches, summed over CPUs, named, the flows looked up in
// the host's conntrack tables (once each: the results are kept), cut to
// the namespace. idle: the few keys a quiet host has; full: the ledger
// filled (LedgerEntries flows, one drop each), a busy host's.
func BenchmarkNamespace(b *testing.B) {
	for _, mode := range []string{"idle", "full"} {
		b.Run(mode, func(b *testing.B) {
			n := benchNetns(b)
			m, err := Start()
			if err != nil {
				b.Skip(err)
			}
			defer m.Close()
			s := newSender(b, n)
			flows := 10
			if mode == "full" {
				flows = LedgerEntries
			}
			for p := range flows {
				s.to = &unix.SockaddrInet4{Port: 20000 + p, Addr: [4]byte{127, 0, 0, 1}}
				s.send()
			}
			ino := uint64(0)
			n.Do(func() error { ino, _ = netns.Inode(""); return nil })
			m.last = nil
			namespace(m, ino)
			for b.Loop() {
				m.last = nil
				namespace(m, ino)
			}
		})
	}
}

// BenchmarkJoin is one search of the conntrack tables for flows not seen
// before: a namespace whose nftables DNAT UDP port 9999 to a port
// nothing listens on, and 500 flows through it, each dropped (NO_SOCKET,
// its entry reset before the drop: found in the table). Each iteration
// forgets what the last found. lookup-us is one ctnetlink lookup.
func BenchmarkJoin(b *testing.B) {
	if _, err := exec.LookPath("nft"); err != nil {
		b.Skip("needs nft(8)")
	}
	n := benchNetns(b)
	m, err := Start()
	if err != nil {
		b.Skip(err)
	}
	defer m.Close()
	rules := filepath.Join(b.TempDir(), "nft.conf")
	os.WriteFile(rules, []byte("table ip t {\n\tchain out {\n\t\ttype nat hook output priority -100;\n\t\tudp dport 9999 dnat to 127.0.0.1:9998\n\t}\n}\n"), 0o600)
	const flows = 500
	err = n.Do(func() error {
		if out, err := exec.Command("nft", "-f", rules).CombinedOutput(); err != nil {
			return fmt.Errorf("nft: %v: %s", err, out)
		}
		for range flows {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				return err
			}
			unix.Sendto(fd, []byte("x"), 0, &unix.SockaddrInet4{Port: 9999, Addr: [4]byte{127, 0, 0, 2}})
			unix.Close(fd)
		}
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	c, err := m.read()
	if err != nil {
		b.Fatal(err)
	}
	lookups := 0
	for b.Loop() {
		m.joins.mu.Lock()
		clear(m.joins.found)
		m.joins.mu.Unlock()
		_, st := m.joins.join(c)
		lookups += st.Lookups
	}
	if lookups > 0 {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(lookups), "lookup-us")
	}
}
