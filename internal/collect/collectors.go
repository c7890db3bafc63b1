package collect

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/dropmon"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/nftables"
	"github.com/netdoctor/netdoctor/internal/procnet"
	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// funcCollector adapts a function to Collector.
type funcCollector struct {
	name string
	fn   func(ctx context.Context, s *evidence.Snapshot) error
}

func (f funcCollector) Name() string { return f.name }
func (f funcCollector) Collect(ctx context.Context, s *evidence.Snapshot) error {
	return f.fn(ctx, s)
}

// Sysctls are the settings the rules read. Per-namespace ones come from
// the observed namespace; net.core.* and fs.* mix global and per-netns.
var Sysctls = []string{
	"net.core.somaxconn", "net.core.netdev_max_backlog", "net.core.netdev_budget",
	"net.core.rmem_default", "net.core.rmem_max", "net.core.wmem_default", "net.core.wmem_max",
	"net.ipv4.tcp_max_syn_backlog", "net.ipv4.tcp_syncookies", "net.ipv4.tcp_synack_retries",
	"net.ipv4.tcp_syn_retries", "net.ipv4.ip_local_port_range", "net.ipv4.ip_local_reserved_ports",
	"net.ipv4.tcp_tw_reuse", "net.ipv4.tcp_tw_recycle", "net.ipv4.tcp_max_tw_buckets",
	"net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_abort_on_overflow", "net.ipv4.tcp_timestamps",
	"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.ipv4.tcp_mem", "net.ipv4.tcp_moderate_rcvbuf",
	"net.ipv4.tcp_low_latency", "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_max_orphans",
	"net.ipv4.tcp_congestion_control", "net.ipv4.tcp_slow_start_after_idle", "net.ipv4.tcp_notsent_lowat",
	"net.ipv4.tcp_mtu_probing",
	"net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets", "net.netfilter.nf_conntrack_count",
	"net.netfilter.nf_conntrack_tcp_timeout_established", "net.netfilter.nf_conntrack_tcp_timeout_time_wait",
	"net.netfilter.nf_conntrack_tcp_timeout_close_wait", "net.netfilter.nf_conntrack_udp_timeout",
	"fs.file-max", "fs.nr_open", "fs.file-nr",
	// The neighbour tables' limits exist in the initial namespace only.
	"net.ipv4.neigh.default.gc_thresh3", "net.ipv6.neigh.default.gc_thresh3",
}

// Default returns the collectors in the order they must run.
func Default(cfg Config, p procnet.Proc, nsInode uint64, k *kmsgCollector, dm dropSource, senders *sockdiag.Senders) []Collector {
	own := newOwners("/proc", nsInode)
	lr := newLinkReader()
	cs := []Collector{
		funcCollector{"counters", func(_ context.Context, s *evidence.Snapshot) error {
			m, err := p.Counters()
			s.Counters = m
			return partialIf(len(m) > 0, err)
		}},
		// The counters rates are taken from next, at the snapshot's
		// time: the rules divide their change by the time between
		// snapshots, so whatever runs before them shifts their read
		// (the firewall's dump and the sysctls took 40 ms each on a
		// busy machine).
		funcCollector{"softnet", func(_ context.Context, s *evidence.Snapshot) error {
			v, err := p.Softnet()
			s.Softnet = v
			return partialIf(len(v) > 0, err)
		}},
		funcCollector{"cpu", func(_ context.Context, s *evidence.Snapshot) error {
			v, err := p.CPU()
			s.CPU = v
			return partialIf(len(v) > 0, err)
		}},
		funcCollector{"interfaces", func(_ context.Context, s *evidence.Snapshot) error {
			v, err := interfaces(p, lr)
			s.Interfaces = v
			return err
		}},
		// The firewall's counters a few milliseconds from the kernel's:
		// a rule's drops and the counters they move are of one moment.
		funcCollector{"firewall", firewall},
		funcCollector{"sockstat", func(_ context.Context, s *evidence.Snapshot) error {
			m, err := p.Sockstat()
			s.Sockstat = m
			return partialIf(len(m) > 0, err)
		}},
		funcCollector{"sysctl", func(_ context.Context, s *evidence.Snapshot) error {
			m, err := p.Sysctls(Sysctls)
			s.Sysctls = m
			return partialIf(len(m) > 0, err)
		}},
		newConntrack(cfg, p),
		funcCollector{"sockdiag", func(_ context.Context, s *evidence.Snapshot) error {
			return sockets(s, own, senders)
		}},
		funcCollector{"processes", func(_ context.Context, s *evidence.Snapshot) error {
			return processes(p, s, cfg.PIDs)
		}},
		funcCollector{"kmsg", k.collect},
		newResolver(cfg),
	}
	if cfg.Drops {
		// Next to the counters: the kernel's counts and the monitor's
		// of one moment.
		cs = slices.Insert(cs, 1, Collector(dropsCollector{dm, nsInode, lr}))
	}
	return cs
}

// firewall reads the namespace's rules that discard or limit packets,
// with their counters; nothing when it has none.
func firewall(_ context.Context, s *evidence.Snapshot) error {
	fw, err := nftables.Read()
	if errors.Is(err, nftables.ErrUnavailable) {
		s.Firewall = &evidence.Firewall{Unavailable: err.Error()}
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	if fw != nil && (len(fw.Rules) > 0 || err != nil) {
		s.Firewall = fw
	}
	if err != nil && fw != nil {
		return partial{err}
	}
	return err
}

// dropSource is the drop monitor a Snapshotter reads, or why it has
// none.
type dropSource struct {
	m   *dropmon.Monitor
	why string
}

// dropsCollector reads the drop monitor for one namespace: its maps at
// the snapshot's moment, next to the counters, and the rest (naming the
// locations, the retransmitting flows' tcp_info) after the other
// collectors.
type dropsCollector struct {
	dm  dropSource
	ino uint64
	// lr describes the devices of the drops elsewhere.
	lr *linkReader
}

func (d dropsCollector) Name() string { return "drops" }

func (d dropsCollector) Collect(ctx context.Context, s *evidence.Snapshot) error {
	finish, err := d.Read(ctx, s)
	if err != nil {
		return err
	}
	return finish()
}

func (d dropsCollector) Read(_ context.Context, s *evidence.Snapshot) (func() error, error) {
	if d.dm.m == nil {
		s.Drops = &evidence.Drops{Unavailable: d.dm.why}
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, d.dm.why)
	}
	c, err := d.dm.m.Read()
	if err != nil {
		s.Drops = &evidence.Drops{Since: d.dm.m.Since(), Unavailable: err.Error()}
		return nil, err
	}
	return func() error { return d.dm.finish(d.dm.m.Drops(c, d.ino), s, d.lr) }, nil
}

// finish stores what the monitor counted for the namespace, with the
// devices of the drops elsewhere described.
func (d dropSource) finish(drops *evidence.Drops, s *evidence.Snapshot, lr *linkReader) error {
	s.Drops = drops
	if s.Drops.Unavailable != "" {
		return errors.New(s.Drops.Unavailable)
	}
	flowInfo(s.Drops.Retrans)
	devs := map[uint64][]int{}
	for _, l := range s.Drops.LedgerElsewhere {
		if l.Ifindex != 0 && l.NetNS != 0 && !slices.Contains(devs[l.NetNS], l.Ifindex) {
			devs[l.NetNS] = append(devs[l.NetNS], l.Ifindex)
		}
	}
	if len(devs) > 0 {
		s.Drops.Links = lr.elsewhere(devs)
	}
	if s.Drops.Overflow > 0 {
		// Counted, not attributed: the report says the evidence is
		// partial rather than let a reason look smaller than it is.
		return partial{fmt.Errorf("%d drops since the monitor started could not be attributed to a reason and place: its table was full", s.Drops.Overflow)}
	}
	return nil
}

// flowInfos is how many retransmitting flows get their tcp_info read.
const flowInfos = 8

// flowInfo reads, for the flows that retransmitted most, what TCP
// believes of their path now (its MTU, its segment size): one exact
// sock_diag lookup each, on the namespace's thread.
func flowInfo(fs []evidence.Retrans) {
	n := min(len(fs), flowInfos)
	if n == 0 {
		return
	}
	ids := make([]sockdiag.SockID, 0, n)
	idx := make([]int, 0, n)
	for i := range n {
		l, err1 := netip.ParseAddrPort(fs[i].Local)
		r, err2 := netip.ParseAddrPort(fs[i].Remote)
		if err1 != nil || err2 != nil {
			continue
		}
		ids = append(ids, sockdiag.SockID{Local: l, Remote: r})
		idx = append(idx, i)
	}
	q, err := sockdiag.NewQuerier()
	if err != nil {
		return
	}
	defer q.Close()
	_ = q.Query(ids, func(i int, _ *sockdiag.InetDiagMsg, t *sockdiag.TCPInfo) {
		if t == nil {
			return
		}
		f := &fs[idx[i]]
		f.Open, f.PMTU, f.SndMSS, f.Lost = true, t.PMTU, t.SndMSS, t.Lost
	})
}

// partialIf turns err into a partial-data error when data came with it.
func partialIf(haveData bool, err error) error {
	if err != nil && haveData {
		return partial{err}
	}
	return err
}

func sockets(s *evidence.Snapshot, own *owners, senders *sockdiag.Senders) error {
	o := sockdiag.Options{Unix: true, Senders: senders, SendersAt: s.Time, SlowStartAfterIdle: -1}
	if v, err := strconv.Atoi(s.Sysctls["net.ipv4.tcp_slow_start_after_idle"]); err == nil {
		o.SlowStartAfterIdle = v
	}
	if lo, hi, ok := portRange(s.Sysctls["net.ipv4.ip_local_port_range"]); ok {
		o.PortLow, o.PortHigh = lo, hi
	}
	if v, ok := s.Counters["Tcp.CurrEstab"]; ok {
		o.CurrEstab, o.HaveCurrEstab = v, true
	}
	// Owners are looked up in /proc while the kernel walks the socket
	// table: on a busy host both take milliseconds.
	var found map[uint64][]int
	done := make(chan struct{})
	called := false
	o.Listeners = func(ls []evidence.Listener) {
		called = true
		inodes := make([]uint64, 0, len(ls))
		for _, l := range ls {
			inodes = append(inodes, l.Inode)
		}
		go func() {
			defer close(done)
			found = own.lookup(inodes, s.Time)
		}()
	}
	socks, sd, err := sockdiag.CollectSenders(o)
	if called {
		<-done
	}
	if socks == nil {
		return err
	}
	s.Sockets, s.Senders = socks, sd
	for i := range socks.Listeners {
		l := &socks.Listeners[i]
		l.PIDs = found[l.Inode]
		if len(l.PIDs) > 0 {
			l.Process = comm(l.PIDs[0])
		}
	}
	if len(socks.Drops) > 0 {
		// Rare (a socket that dropped): its owners are looked up after.
		inodes := make([]uint64, 0, len(socks.Drops))
		for _, d := range socks.Drops {
			inodes = append(inodes, d.Inode)
		}
		found := own.lookup(inodes, s.Time)
		for i := range socks.Drops {
			d := &socks.Drops[i]
			d.PIDs = found[d.Inode]
			if len(d.PIDs) > 0 {
				d.Process = comm(d.PIDs[0])
			}
		}
		// netdoctor's own sockets (its load's connections, its calls
		// to an agent) drop when netdoctor reads late: that is never
		// the measured service's buffer, so they are not evidence.
		self := os.Getpid()
		socks.Drops = slices.DeleteFunc(socks.Drops, func(d evidence.SocketDrops) bool { return slices.Contains(d.PIDs, self) })
	}
	if err != nil {
		return partial{err}
	}
	return nil
}

// portRange parses "32768 60999".
func portRange(v string) (lo, hi uint16, ok bool) {
	f := strings.Fields(v)
	if len(f) != 2 {
		return 0, 0, false
	}
	a, err1 := strconv.ParseUint(f[0], 10, 16)
	b, err2 := strconv.ParseUint(f[1], 10, 16)
	return uint16(a), uint16(b), err1 == nil && err2 == nil && a <= b
}

func numCPU() int { return runtime.NumCPU() }
