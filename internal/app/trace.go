package app

import (
	"context"
	"fmt"
	"math"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/pace"
	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// MaxTracedConns bounds the open connections TraceDeps follows at once:
// a server with more outbound connections than this is traced on the
// first ones found. A connection that closes frees its place.
const MaxTracedConns = 256

// maxKeptConns bounds every connection a trace remembers, open or
// closed: a server opening a connection per request would otherwise
// grow it for as long as the trace lasts.
const maxKeptConns = 16 * MaxTracedConns

// maxFDScan bounds the descriptors read (a readlink each) in one
// process each second: a proxy holding 16 000 client connections is
// walked 4096 at a time, from where the last walk stopped (listFDs
// reads the directory from there, not whole), instead of paying ~1 µs
// per descriptor every second. A pool's long-lived connections are
// found within a few seconds all the same.
const maxFDScan = 4096

// maxKeptSkips bounds the sockets a windowed walk remembers as not worth
// a look (inbound, not TCP): the descriptors of 16 such processes.
const maxKeptSkips = 1 << 18

// maxProbeLookups bounds the probes between two looks (sample, probe):
// 256 busy connections waiting for their next movement would otherwise
// cost four lookups each per look. peerEvery is how many looks of a
// connection its dependency's end is looked up once, at random (a share
// of looks that held data back needs no more; every fourth look of a
// 44 ms exchange at 100 ms aliased into 10 % where half held it).
const (
	maxProbeLookups = 64
	peerEvery       = 2
)

// DepInterval is how often a trace samples the connections it follows.
const DepInterval = 100 * time.Millisecond

// quietAfter is how many samples in a row a connection must show no
// data segment either way, and no request outstanding, before a trace
// looks at it once a second instead of every interval: an idle pool's
// connections cost a lookup each per second instead of ten (a lookup is
// ~1 µs of the kernel's, the bulk of a burst's cost with 256 idle
// connections). Its first data segment puts it back to every interval.
const quietAfter = 5

// tracer is TraceDeps' state: the connections found so far, and the
// sockets already looked at and left out (inbound, not TCP).
type tracer struct {
	// conns are every connection seen, for the tables; alive those
	// still open, which each tick looks up.
	conns   []*connTrace
	alive   []*connTrace
	byInode map[uint64]*connTrace
	// unix are the unix-socket connections still open, looked up by
	// inode every interval (they are in conns too).
	unix []*connTrace
	// offset is where each process's next descriptor walk starts.
	offset  map[int]int
	skip    map[uint64]bool
	local   map[netip.Addr]bool
	refresh int
	// dirBuf is listFDs' getdents buffer: 4 KiB, ~128 descriptors a
	// call, since the kernel makes a dentry for each entry it fills
	// and a walk that stops early should not pay for a full 32 KiB.
	dirBuf []byte
}

// TraceDeps follows the servers' outbound TCP and unix-socket
// connections until ctx ends: every second it looks for new ones among
// the servers' descriptors, and every DepInterval (a pace.Ticker's
// lattice: a slow look drops the looks it overran, and the next ones are
// on time) it asks the kernel for each one's tcp_info (a unix socket's
// queue lengths) by an exact lookup (so the cost grows with these few
// connections, not with the host's socket table). Destinations that
// listen in this namespace become servers of the run too, role
// "dependency". When it returns, each server's Deps say what its
// connections showed. A run calls it for the load's duration only.
func (o *Observer) TraceDeps(ctx context.Context) error {
	var q *sockdiag.Querier
	t := &tracer{byInode: map[uint64]*connTrace{}, skip: map[uint64]bool{}, offset: map[int]int{}, dirBuf: make([]byte, 4<<10)}
	err := o.ns.Do(func() error {
		var err error
		q, err = sockdiag.NewQuerier()
		t.local = localAddrs()
		o.ownNS, _ = netns.Inode("")
		return err
	})
	if err != nil {
		return fmt.Errorf("trace dependencies: %w", err)
	}
	defer q.Close()
	every := max(1, int(time.Second/DepInterval))
	looks := pace.New(DepInterval)
	var ids []sockdiag.SockID
	var looked []lookRef
	for {
		tick, ok := looks.Next(ctx)
		if !ok {
			o.finishDeps(t)
			return nil
		}
		i := tick.N
		if i%every == 0 {
			o.findConns(ctx, t)
		}
		ids, looked = ids[:0], looked[:0]
		for _, c := range t.alive {
			if c.due <= i {
				ids = append(ids, c.id)
				looked = append(looked, lookRef{c: c, counted: true})
				if c.peer.Local.IsValid() && c.quiet == 0 && c.peerDue() {
					ids = append(ids, c.peer)
					looked = append(looked, lookRef{c: c, peer: true})
				}
			}
		}
		now := time.Now()
		if err := t.query(q, ids, looked, now, i, every); err != nil {
			return fmt.Errorf("trace dependencies: %w", err)
		}
		if err := t.sampleUnix(q, now); err != nil {
			return fmt.Errorf("trace dependencies: %w", err)
		}
		// Probes until the next look: the connections whose last look
		// decided nothing, soon after it, to catch what moves first; at
		// most maxProbeLookups a tick, the rest left to the lattice.
		next := looks.Due()
		budget := maxProbeLookups
		for {
			at := next
			for _, c := range t.alive {
				if !c.probeAt.IsZero() && c.probeAt.Before(at) {
					at = c.probeAt
				}
			}
			if !pace.Until(ctx, at) {
				o.finishDeps(t)
				return nil
			}
			if !at.Before(next) {
				break
			}
			ids, looked = ids[:0], looked[:0]
			now := time.Now()
			for _, c := range t.alive {
				if c.probeAt.IsZero() || c.probeAt.After(now) {
					continue
				}
				if budget == 0 {
					c.probeAt = time.Time{}
					continue
				}
				budget--
				ids = append(ids, c.id)
				looked = append(looked, lookRef{c: c})
			}
			if err := t.query(q, ids, looked, now, i, every); err != nil {
				return fmt.Errorf("trace dependencies: %w", err)
			}
		}
	}
}

// lookRef is one lookup of a tick: a connection's look (counted) or
// probe, or its peer's end.
type lookRef struct {
	c             *connTrace
	peer, counted bool
}

// query looks up ids, each for its lookRef, at now, the trace's tick i
// (every ticks a second), and drops the connections a look did not find.
func (t *tracer) query(q *sockdiag.Querier, ids []sockdiag.SockID, looked []lookRef, now time.Time, i, every int) error {
	if len(ids) == 0 {
		return nil
	}
	found := 0
	if err := q.Query(ids, func(j int, m *sockdiag.InetDiagMsg, ti *sockdiag.TCPInfo) {
		r := looked[j]
		switch {
		case r.peer:
			r.c.peerLook(m, ti)
		case r.counted:
			r.c.sample(now, ti, i, every)
			r.c.at = now
			found++
		default:
			r.c.probe(now, ti)
			r.c.at = now
			found++
		}
	}); err != nil {
		return err
	}
	if found < len(looked) {
		var mine []*connTrace
		for _, r := range looked {
			if !r.peer {
				mine = append(mine, r.c)
			}
		}
		if found < len(mine) {
			t.prune(mine, now)
		}
	}
	return nil
}

// prune drops the connections the last lookup (of looked, at now) did
// not find (closed) from those looked up: their place goes to new ones,
// their samples stay for the tables.
func (t *tracer) prune(looked []*connTrace, now time.Time) {
	for _, c := range looked {
		if !c.at.Equal(now) {
			c.gone = true
			delete(t.byInode, c.ino)
		}
	}
	open := t.alive[:0]
	for _, c := range t.alive {
		if !c.gone {
			open = append(open, c)
		}
	}
	clear(t.alive[len(open):])
	t.alive = open
}

// sampleUnix looks up every open unix connection at now; those the
// lookup does not find (closed) leave the open ones.
func (t *tracer) sampleUnix(q *sockdiag.Querier, now time.Time) error {
	if len(t.unix) == 0 {
		return nil
	}
	ids := make([]sockdiag.UnixID, len(t.unix))
	for i, c := range t.unix {
		ids[i] = sockdiag.UnixID{Inode: uint32(c.ino), Cookie: c.id.Cookie}
	}
	if err := q.QueryUnix(ids, func(i int, m *sockdiag.UnixDiagMsg) {
		t.unix[i].sampleUnix(now, m)
		t.unix[i].at = now
	}); err != nil {
		return err
	}
	open := t.unix[:0]
	for _, c := range t.unix {
		if c.at.Equal(now) {
			open = append(open, c)
			continue
		}
		c.gone = true
		delete(t.byInode, c.ino)
	}
	clear(t.unix[len(open):])
	t.unix = open
	return nil
}

// open is how many connections the trace looks up each interval.
func (t *tracer) open() int { return len(t.alive) + len(t.unix) }

// finishDeps hands each server its dependencies.
func (o *Observer) finishDeps(t *tracer) {
	// TCP_NODELAY on the dependencies' ends that held answers back:
	// each owner's descriptors walked once for all of them.
	want := map[string]map[uint32]sockOpt{}
	for _, c := range t.conns {
		if c.peerHeld > 0 && c.peerIno != 0 {
			if want[c.dst] == nil {
				want[c.dst] = map[uint32]sockOpt{}
			}
			want[c.dst][c.peerIno] = optUnknown
		}
	}
	for dst, w := range want {
		if l, ok := o.localListener(dst); ok {
			peerNoDelay(o.proc, l.PIDs, w)
		}
	}
	for _, c := range t.conns {
		if w := want[c.dst]; w != nil && c.peerHeld > 0 {
			c.peerNoDelay = w[c.peerIno]
		}
	}
	deps := dependencies(t.conns, o.owner)
	for _, s := range o.servers() {
		s.Deps, s.Traced = deps[s], true
	}
}

// owner names the process listening at d's address: in this namespace
// or, when the address is none of its, in another namespace of the host
// (looked up once per destination), and whether it is observed as a
// server of the run.
func (o *Observer) owner(d *Dependency) {
	if l, ok := o.localListener(d.Addr); ok {
		d.Owner, d.Observed = o.localOwner(l)
		return
	}
	if strings.HasPrefix(d.Addr, "unix:") {
		// Not a listener of the namespace when the trace began: its
		// owner is not known (see observeDep).
		return
	}
	f := o.lookElsewhere(context.Background(), d.Addr)
	d.Owner, d.Observed, d.OtherHost = f.name, f.observed, f.otherHost
}

// localOwner names the owner of a listener of this namespace.
func (o *Observer) localOwner(l kernel.Listener) (string, bool) {
	for _, s := range o.servers() {
		if s.Addr == l.Addr {
			return serverName(s, ""), true
		}
	}
	if len(l.PIDs) > 0 {
		if p, ok := readProc(o.proc, l.PIDs[0]); ok {
			return procName(kindOf(p.comm), p.pid, ""), false
		}
	}
	return "", false
}

// serverName is "nginx (pid 12)": the server's kind and its master, or
// its first process; ns names its namespace when not the run's.
func serverName(s *Server, ns string) string {
	pid := s.PIDs[0]
	if s.Master != 0 {
		pid = s.Master
	}
	return procName(s.Kind, pid, ns)
}

func procName(kind string, pid int, ns string) string {
	if ns != "" {
		return fmt.Sprintf("%s (pid %d, netns %s)", kind, pid, ns)
	}
	return fmt.Sprintf("%s (pid %d)", kind, pid)
}

// localListener finds the listener of this namespace at dst, when dst
// is one of its addresses.
func (o *Observer) localListener(dst string) (l kernel.Listener, ok bool) {
	if strings.HasPrefix(dst, "unix:") {
		// A path lives in the filesystem, an abstract name in the
		// namespace: either way, the listener the server reached is
		// the namespace's listener of that name (a path socket bound
		// in another namespace and shared through a mount is not
		// among them, and is left unowned).
		return findListener(o.listeners, dst)
	}
	ap, err := netip.ParseAddrPort(dst)
	if err != nil || o.deps == nil && !ap.Addr().IsLoopback() {
		return l, false
	}
	if !ap.Addr().IsLoopback() && !o.deps.local[ap.Addr()] {
		return l, false
	}
	return findListener(o.listeners, dst)
}

// findConns looks through the servers' descriptors for TCP connections
// they opened (whose local port is no listener's) and adds those not
// seen yet; a destination listening here is observed as a server.
func (o *Observer) findConns(ctx context.Context, t *tracer) {
	o.mu.Lock()
	o.deps = t
	o.mu.Unlock()
	ports := map[uint16]bool{}
	paths := map[string]bool{}
	for _, l := range o.listeners {
		if l.Proto != "unix" {
			ports[uint16(l.Port)] = true
		} else {
			paths[l.Addr] = true
		}
	}
	listening := func(path string) bool { return paths[path] }
	first := t.refresh == 0
	t.refresh++
	if t.open() >= MaxTracedConns || len(t.conns) >= maxKeptConns {
		return
	}
	// Only the sockets still open stay skipped: a trace that lasts as
	// long as an agent's watch must not keep every inode it ever saw.
	skip := map[uint64]bool{}
	windowed := false
	defer func() {
		// A walk that read part of a process's descriptors saw only
		// part of its sockets: the others' verdicts are kept (bounded),
		// or the next walks would look at each one again.
		for ino := range t.skip {
			if !windowed || len(skip) >= maxKeptSkips {
				break
			}
			skip[ino] = true
		}
		t.skip = skip
	}()
	for _, s := range o.servers() {
		for _, pid := range o.pids(s) {
			dir := o.proc + "/" + strconv.Itoa(pid) + "/fd"
			full := false
			list := func(from int, fn func(int) bool) (bool, error) { return listFDs(dir, from, t.dirBuf, fn) }
			partial, err := t.walkFDs(pid, list, func(fd int) bool {
				if t.open() >= MaxTracedConns || len(t.conns) >= maxKeptConns {
					full = true
					return false
				}
				link, err := os.Readlink(dir + "/" + strconv.Itoa(fd))
				if err != nil || !strings.HasPrefix(link, "socket:[") {
					return true
				}
				ino, err := strconv.ParseUint(strings.TrimSuffix(link[len("socket:["):], "]"), 10, 64)
				if err != nil || t.byInode[ino] != nil {
					return true
				}
				if t.skip[ino] {
					skip[ino] = true
					return true
				}
				id, ux, noDelay, ok := outbound(pid, fd, ports)
				var c *connTrace
				switch {
				case ok:
					c = &connTrace{srv: s, dst: id.Remote.String(), id: id, ino: ino, isNew: !first, noDelay: noDelay}
					if _, local := o.localListener(c.dst); local {
						// The dependency's end is a socket of this
						// namespace too: looked up with each look, for
						// what it holds back (Nagle).
						c.peer = sockdiag.SockID{Local: id.Remote, Remote: id.Local}
					}
					t.alive = append(t.alive, c)
				case ux != nil && ino <= math.MaxUint32 && unixOutbound(fd, ux, listening):
					// unix_diag_req's udiag_ino is 32 bits, as
					// socket inodes are (get_next_ino).
					c = &connTrace{srv: s, dst: "unix:" + ux.peer, id: sockdiag.SockID{Cookie: ux.cookie}, ino: ino, isNew: !first, unix: true}
					t.unix = append(t.unix, c)
				default:
					skip[ino] = true
					return true
				}
				t.byInode[ino] = c
				t.conns = append(t.conns, c)
				o.observeDep(ctx, c.dst)
				return true
			})
			if err != nil {
				continue
			}
			windowed = windowed || partial
			if full {
				return
			}
		}
	}
}

// fdLister lists a process's descriptor numbers from one on, in
// increasing order (listFDs on its /proc/PID/fd).
type fdLister func(from int, fn func(fd int) bool) (end bool, err error)

// walkFDs calls fn with the descriptors this walk of process pid reads:
// all of them up to maxFDScan, else maxFDScan from where the last walk
// of this process stopped, wrapping around. fn returns false to stop
// before a descriptor (the traced connections' places are all taken):
// the next walk starts there. partial says the walk read only part of
// the process's descriptors.
func (t *tracer) walkFDs(pid int, list fdLister, fn func(fd int) bool) (partial bool, err error) {
	from := t.offset[pid]
	read, stop := 0, -1
	visit := func(upto int) func(int) bool {
		return func(fd int) bool {
			if fd >= upto {
				return false // wrapped round to where the walk started
			}
			if read == maxFDScan || !fn(fd) {
				stop = fd
				return false
			}
			read++
			return true
		}
	}
	end, err := list(from, visit(math.MaxInt))
	if err != nil {
		delete(t.offset, pid)
		return false, err
	}
	if end && from > 0 {
		// The descriptors below where this walk started; an error here
		// (the process ended meanwhile) leaves them for the next walk.
		if _, err := list(0, visit(from)); err != nil {
			delete(t.offset, pid)
			return true, nil
		}
	}
	if stop < 0 {
		delete(t.offset, pid)
		return false, nil
	}
	t.offset[pid] = stop
	return true, nil
}

// pids are a server's processes: its listener's owners and a master's
// workers.
func (o *Observer) pids(s *Server) []int {
	pids := s.PIDs
	if s.Master != 0 {
		pids = append(slices.Clone(pids), children(o.proc, s.Master)...)
	}
	return pids
}

// observeDep makes a destination listening on this host a server of
// the run: here, or in another namespace.
func (o *Observer) observeDep(ctx context.Context, dst string) {
	l, ok := o.localListener(dst)
	if !ok {
		if !strings.HasPrefix(dst, "unix:") {
			o.lookElsewhere(ctx, dst)
		}
		return
	}
	for _, s := range o.servers() {
		if s.Addr == l.Addr {
			return
		}
	}
	o.server(ctx, l, "dependency", o.seen)
}

// DepTrace is TraceDeps running on a goroutine of its own, for a caller
// that starts and stops it at times of its choosing: the agent's
// watches, which trace for a client on another host.
type DepTrace struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// StartDeps starts tracing the servers' dependencies until Stop, which
// the caller must call.
func (o *Observer) StartDeps() *DepTrace {
	ctx, cancel := context.WithCancel(context.Background())
	d := &DepTrace{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(d.done)
		_ = o.TraceDeps(ctx)
	}()
	return d
}

// Stop ends the trace and waits for its goroutine: then each server's
// Deps say what it saw. The trace writes them as it ends, so the caller
// must keep the servers from being read meanwhile. Stopping a nil or a
// stopped trace does nothing.
func (d *DepTrace) Stop() {
	if d == nil {
		return
	}
	d.cancel()
	<-d.done
}
