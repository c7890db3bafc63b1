package dropmon

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/rlimit"
	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// Monitor is the drop monitor, attached. Its methods are safe for
// concurrent use.
type Monitor struct {
	mu      sync.Mutex
	coll    *ebpf.Collection
	drops   *ebpf.Map
	ledger  *ebpf.Map
	retrans *ebpf.Map
	stats   *ebpf.Map
	links   []link.Link
	reasons Reasons
	syms    symbols
	since   time.Time
	// noRetrans says why retransmissions are not counted, when not.
	noRetrans string
	// last is the latest read: the sides of a run sample at the same
	// moment, and read the maps once.
	last *Counts
	// joins follows flows through the host's conntrack tables.
	joins *joiner
	// rows is how many rows the ledger had at the last read.
	rows int
}

// fresh is how old a read may be and still serve another namespace's
// snapshot.
const fresh = 50 * time.Millisecond

// Drops is what c counted for the namespace of inode ino (and elsewhere
// on the host), its locations named. Naming a location not seen before
// reads /proc/kallsyms, 50 ms of the kernel's time on an idle machine
// and several times that on a busy one: a snapshot calls it after its
// other collectors (Read is of the snapshot's moment), so that their
// counters are not read that much later than the snapshot's time.
//
// The flows of the drops and retransmissions whose packets carried no
// conntrack entry are looked up in the conntrack tables of the host's
// namespaces (bounded, the results kept for the next snapshot): see
// joiner.
func (m *Monitor) Drops(c *Counts, ino uint64) *evidence.Drops {
	m.mu.Lock()
	named := c.named(&m.syms)
	m.mu.Unlock()
	named.Joins, named.JoinStatus = m.joins.join(named)
	names := namespaceNames()
	d := named.Namespace(ino, names)
	d.Since = m.since
	return d
}

// named returns a copy of c with the drops' locations named, c itself
// unchanged: it may serve another namespace's snapshot at once. The
// ledger's rows, thousands, are not copied: their names are in Funcs.
func (c *Counts) named(syms *symbols) *Counts {
	locs := map[uint64]bool{}
	for _, d := range c.Drops {
		locs[d.Location] = true
	}
	prev := uint64(0)
	for i, l := range c.Ledger {
		if i == 0 || l.Location != prev {
			locs[l.Location] = true
			prev = l.Location
		}
	}
	syms.resolve(sortedKeys(locs))
	out := *c
	out.Drops, out.Ports = slices.Clone(c.Drops), slices.Clone(c.Ports)
	for _, ds := range [][]RawDrop{out.Drops, out.Ports} {
		for i := range ds {
			ds[i].Func = syms.name(ds[i].Location)
		}
	}
	out.Funcs = make(map[uint64]string, len(locs))
	for l := range locs {
		out.Funcs[l] = syms.name(l)
	}
	return &out
}

// Read reads the maps, or returns a read taken within fresh: everything
// counted so far, the reasons named, the locations not yet (Drops names
// them).
func (m *Monitor) Read() (*Counts, error) {
	m.mu.Lock()
	last := m.last
	m.mu.Unlock()
	if last != nil && time.Since(last.Time) < fresh {
		return last, nil
	}
	c, err := m.read()
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.last = c
	m.mu.Unlock()
	return c, nil
}

// namespaceNames maps the inode of every namespace `ip netns` names to
// its name.
func namespaceNames() map[uint64]string {
	names, _ := netns.List()
	out := make(map[uint64]string, len(names))
	for _, n := range names {
		ns := netns.Parse(n)
		var st unix.Stat_t
		if unix.Stat(ns.Path, &st) == nil {
			out[st.Ino] = n
		}
	}
	return out
}

// Start loads and attaches the monitor. Its error, when BPF cannot run
// here, is an *Unavailable saying why in words a user can act on.
func Start() (*Monitor, error) { return startSized(LedgerEntries, RetransEntries) }

// startSized is Start with the per-flow tables' sizes (tests make them small
// to flood them).
func startSized(ledgerEntries, retransEntries uint32) (*Monitor, error) {
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, unavailable("the kernel has no BTF (/sys/kernel/btf/vmlinux: CONFIG_DEBUG_INFO_BTF is off)", err)
	}
	reasons, err := kernelReasons(kernel)
	if err != nil {
		return nil, unavailable("the kernel has no drop reasons (enum skb_drop_reason: Linux 5.17 or later)", err)
	}
	kfreeArgs, err := tracepointArgs(kernel, "kfree_skb")
	if err != nil {
		return nil, unavailable("the kernel has no skb:kfree_skb tracepoint with BTF", err)
	}
	retransArgs, retransErr := tracepointArgs(kernel, "tcp_retransmit_skb")

	spec, err := loadDropmon()
	if err != nil {
		return nil, err
	}
	// Keep the program of each tracepoint that matches the arguments
	// this kernel passes.
	keep := map[string]bool{}
	switch kfreeArgs {
	case 4:
		keep[dropmonProgKfreeSkb] = true
	case 3:
		keep[dropmonProgKfreeSkbNorxsk] = true
	default:
		return nil, unavailable(fmt.Sprintf("skb:kfree_skb passes %d arguments on this kernel, not 3 or 4", kfreeArgs), nil)
	}
	noRetrans := ""
	switch {
	case retransErr != nil:
		noRetrans = "the kernel has no tcp:tcp_retransmit_skb tracepoint with BTF"
	case retransArgs == 3:
		keep[dropmonProgTcpRetransmitSkb] = true
	case retransArgs == 2:
		keep[dropmonProgTcpRetransmitSkbNoerr] = true
	default:
		noRetrans = fmt.Sprintf("tcp:tcp_retransmit_skb passes %d arguments on this kernel", retransArgs)
	}
	for name := range spec.Programs {
		if !keep[name] {
			delete(spec.Programs, name)
		}
	}
	spec.Maps[dropmonMapLedger].MaxEntries = ledgerEntries
	spec.Maps[dropmonMapRetrans].MaxEntries = retransEntries
	// Kernels before 5.11 charge BPF memory to RLIMIT_MEMLOCK; later
	// ones to the memory cgroup, and this does nothing.
	_ = rlimit.RemoveMemlock()
	coll, err := ebpf.NewCollectionWithOptions(spec, ebpf.CollectionOptions{Programs: ebpf.ProgramOptions{KernelTypes: kernel}})
	if err != nil {
		return nil, loadErr(err)
	}
	m := &Monitor{coll: coll, drops: coll.Maps[dropmonMapDrops], ledger: coll.Maps[dropmonMapLedger], retrans: coll.Maps[dropmonMapRetrans],
		stats: coll.Maps[dropmonMapStats], reasons: reasons, noRetrans: noRetrans, joins: newJoiner(),
		syms: symbols{open: func() (io.ReadCloser, error) { return os.Open("/proc/kallsyms") }, names: map[uint64]string{}}}
	for name, p := range coll.Programs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p, AttachType: ebpf.AttachTraceRawTp})
		if err != nil {
			m.Close()
			return nil, loadErr(fmt.Errorf("attach %s: %w", name, err))
		}
		m.links = append(m.links, l)
	}
	m.since = time.Now()
	return m, nil
}

// Close detaches the programs and frees the maps. It may be called more
// than once.
func (m *Monitor) Close() error {
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var errs []error
	for _, l := range m.links {
		errs = append(errs, l.Close())
	}
	m.links = nil
	if m.coll != nil {
		m.coll.Close()
		m.coll = nil
	}
	return errors.Join(errs...)
}

// Since is when the monitor began counting.
func (m *Monitor) Since() time.Time { return m.since }

// RetransUnavailable says why retransmissions are not counted, "" when
// they are.
func (m *Monitor) RetransUnavailable() string { return m.noRetrans }

// read returns everything counted so far, summed over CPUs, with the
// reasons named.
func (m *Monitor) read() (*Counts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.coll == nil {
		return nil, errors.New("drop monitor closed")
	}
	c := &Counts{Time: time.Now(), LedgerSize: int(m.ledger.MaxEntries()), RetransSize: int(m.retrans.MaxEntries())}
	var err error
	if c.Drops, err = readDrops(m.drops); err != nil {
		return nil, err
	}
	// As many rows as last time, and some: a full ledger's 16 384 rows
	// grown by appending cost more than reading them.
	c.Ledger = make([]RawLedger, 0, min(c.LedgerSize, m.rows+m.rows/4+64))
	err = readShared(m.ledger, func(k *dropmonLedgerKey, v *dropmonLedgerVal) {
		c.Ledger = append(c.Ledger, rawLedger(k, v))
	})
	if err != nil {
		return nil, err
	}
	err = readShared(m.retrans, func(k *dropmonFlowKey, v *dropmonFlowVal) {
		c.Flows = append(c.Flows, RawFlow{NetNS: k.Netns, Family: k.Family, Sport: k.Sport, Dport: k.Dport, Saddr: k.Saddr, Daddr: k.Daddr,
			Skbs: v.Skbs, Bytes: v.Bytes, Full: v.Full, MaxLen: v.MaxLen, MSS: v.Mss})
	})
	if err != nil {
		return nil, err
	}
	for slot := uint32(0); slot < statMax; slot++ {
		var per []uint64
		if err := m.stats.Lookup(slot, &per); err != nil {
			return nil, fmt.Errorf("read drop monitor stats: %w", err)
		}
		for _, v := range per {
			c.Stats[slot] += v
		}
	}
	for i := range c.Drops {
		c.Drops[i].Name = m.reasons.Name(c.Drops[i].Reason)
	}
	for i := range c.Ledger {
		c.Ledger[i].Name = m.reasons.Name(c.Ledger[i].Reason)
	}
	m.rows = len(c.Ledger)
	c.nameDevices()
	c.Ports = c.portDrops()
	return c, nil
}

// readDrops reads a drops map, summing each key's per-CPU values.
func readDrops(mp *ebpf.Map) ([]RawDrop, error) {
	var out []RawDrop
	err := readPerCPU(mp, func(k *dropmonDropKey, vs []dropmonDropVal) {
		out = append(out, rawDrop(k, vs))
	})
	return out, err
}

// readShared calls fn with every key of a map with one value for all
// CPUs, a few hundred keys a system call.
func readShared[K, V any](mp *ebpf.Map, fn func(*K, *V)) error {
	keys := make([]K, batch)
	vals := make([]V, batch)
	var cur ebpf.MapBatchCursor
	for {
		n, err := mp.BatchLookup(&cur, keys, vals, nil)
		for i := range n {
			fn(&keys[i], &vals[i])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) && n == 0 {
			var k K
			var v V
			it := mp.Iterate()
			for it.Next(&k, &v) {
				fn(&k, &v)
			}
			if err := it.Err(); err != nil {
				return fmt.Errorf("read %s: %w", mp, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", mp, err)
		}
	}
}

// rawDrop is a key of a drops map with its values summed.
func rawDrop(k *dropmonDropKey, vs []dropmonDropVal) RawDrop {
	d := RawDrop{NetNS: k.Netns, Reason: k.Reason, Location: k.Location, Ifindex: k.Ifindex,
		Ethertype: k.Ethertype, IPProto: k.Ipproto, Iface: cString(k.Ifname[:])}
	for _, v := range vs {
		d.Packets += v.Packets
		d.Bytes += v.Bytes
	}
	return d
}

// batch is how many keys one bpf(2) call reads.
const batch = 256

// readPerCPU calls fn with every key of a per-CPU map and its values,
// a few hundred keys a system call (iterating would take two a key:
// 8192 keys cost 60 ms).
func readPerCPU[K, V any](mp *ebpf.Map, fn func(*K, []V)) error {
	ncpu, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	keys := make([]K, batch)
	vals := make([]V, batch*ncpu)
	var cur ebpf.MapBatchCursor
	for {
		n, err := mp.BatchLookup(&cur, keys, vals, nil)
		for i := range n {
			fn(&keys[i], vals[i*ncpu:(i+1)*ncpu])
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			return nil
		}
		if errors.Is(err, ebpf.ErrNotSupported) && n == 0 {
			return iteratePerCPU(mp, fn)
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", mp, err)
		}
	}
}

// iteratePerCPU is readPerCPU for kernels without batch lookups (before
// 5.6).
func iteratePerCPU[K, V any](mp *ebpf.Map, fn func(*K, []V)) error {
	var k K
	var vs []V
	it := mp.Iterate()
	for it.Next(&k, &vs) {
		fn(&k, vs)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("read %s: %w", mp, err)
	}
	return nil
}

// kernelReasons names enum skb_drop_reason's values.
func kernelReasons(kernel *btf.Spec) (Reasons, error) {
	var e *btf.Enum
	if err := kernel.TypeByName("skb_drop_reason", &e); err != nil {
		return nil, err
	}
	vals := make(map[string]uint64, len(e.Values))
	for _, v := range e.Values {
		vals[v.Name] = v.Value
	}
	return newReasons(vals), nil
}

// tracepointArgs is how many arguments a tracepoint passes its programs,
// from the kernel's btf_trace_NAME (whose first parameter is the
// tracepoint's own context, not passed).
func tracepointArgs(kernel *btf.Spec, name string) (int, error) {
	var td *btf.Typedef
	if err := kernel.TypeByName("btf_trace_"+name, &td); err != nil {
		return 0, err
	}
	p, ok := td.Type.(*btf.Pointer)
	if !ok {
		return 0, fmt.Errorf("btf_trace_%s is not a function pointer", name)
	}
	fp, ok := p.Target.(*btf.FuncProto)
	if !ok || len(fp.Params) == 0 {
		return 0, fmt.Errorf("btf_trace_%s is not a function pointer", name)
	}
	return len(fp.Params) - 1, nil
}

// loadErr turns a refusal to load or attach into the reason a user can
// act on.
func loadErr(err error) error {
	switch {
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		if mode := lockdown(); mode != "" && mode != "none" {
			return unavailable("the kernel is locked down ("+mode+"): BPF may not read kernel memory", err)
		}
		if os.Geteuid() != 0 {
			return unavailable("not root: loading BPF needs root, or CAP_BPF and CAP_PERFMON", err)
		}
		return unavailable("the kernel refused to load BPF (a security module, or unprivileged BPF disabled for this process)", err)
	case errors.Is(err, unix.ENOSYS):
		return unavailable("the kernel has no bpf(2) (CONFIG_BPF_SYSCALL is off)", err)
	}
	return unavailable("the kernel refused the drop monitor's BPF programs", err)
}

// lockdown is the kernel's lockdown mode ("none", "integrity",
// "confidentiality"), "" when it has no such file.
func lockdown() string {
	b, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return ""
	}
	return parseLockdown(string(b))
}

// Flags of a ledger key, as bpf/dropmon.c sets them.
const (
	flowSocket   = 1 // SockPort is the local socket's port
	flowFromSock = 2 // the tuple is the socket's
	flowCT       = 4 // the Ct fields are conntrack's original tuple
	flowCTReply  = 8 // the packet went that entry's reply way
)

// rawLedger is a key of the ledger with its count.
func rawLedger(k *dropmonLedgerKey, v *dropmonLedgerVal) RawLedger {
	l := RawLedger{NetNS: k.Netns, Reason: k.Reason, Location: k.Location, Ifindex: k.Ifindex, Ethertype: k.Ethertype, IPProto: k.Ipproto,
		Flow:     tuple(k.Family, k.Proto, k.Saddr, k.Sport, k.Daddr, k.Dport),
		FromSock: k.Flags&flowFromSock != 0, HasCT: k.Flags&flowCT != 0, CTReply: k.Flags&flowCTReply != 0,
		Packets: v.Packets, Bytes: v.Bytes, MaxLen: v.MaxLen}
	if k.Flags&flowSocket != 0 {
		l.SockPort = k.SockPort
	}
	if l.HasCT {
		l.CT = tuple(k.Family, k.CtProto, k.CtSaddr, k.CtSport, k.CtDaddr, k.CtDport)
	}
	return l
}
