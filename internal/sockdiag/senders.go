package sockdiag

import (
	"cmp"
	"container/heap"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Senders accounts what held the senders of one namespace's TCP
// connections, connection by connection, across the snapshots of one
// source: each snapshot's dump looks at every connection (a Round), and
// the kernel's notices of their ends (WatchEnds) give the last counters
// of those that end between two looks. The counters it reports are
// cumulative per listening port and per peer (kernel.Senders). It is
// safe for one Round and the end watcher at once.
type Senders struct {
	mu    sync.Mutex
	since time.Time
	gen   uint64
	conns map[uint64]*sender // open, by socket cookie
	// gone are connections a complete dump no longer showed, accounted
	// at their last look, kept two rounds for a late notice of their
	// end; ended are the cookies whose end was noticed, kept two rounds
	// so that a dump that read the socket before its end does not
	// count it again.
	gone  map[uint64]*sender
	ended map[uint64]uint64
	acc   map[groupKey]*groupAcc
	// listen is the last round's listening ports, to place ends.
	listen   *[65536 / 64]uint64
	infoSize int
	ends     endState
}

// endState is what the end watcher reported.
type endState struct {
	on   bool
	why  string
	lost uint64
}

// groupKey names a listening port or a peer.
type groupKey struct {
	kind uint8 // groupListener, groupClient, groupDest
	port uint16
	addr netip.Addr
}

const (
	groupListener = iota
	groupClient
	groupDest
)

// groupAcc is a group's counters of connections no longer open, plus
// what the looks counted; the open connections' own counters are added
// when a snapshot is made.
type groupAcc struct {
	since    time.Time
	touched  uint64
	c        kernel.SenderCounters
	prevBusy uint64
	// gauge is the group at the round gaugeGen; total a scratch of
	// Finish's.
	gaugeGen uint64
	gauge    gauge
	total    kernel.SenderCounters
}

// sender is one connection between looks.
type sender struct {
	listen, peer groupKey
	inbound      bool
	// accs are its groups' accumulators (listen's, then peer's; peer's
	// alone when not inbound), held to spare a map lookup a look: a
	// group with an open connection is never pruned.
	accs [2]*groupAcc
	n    int
	last kcounters
	gen  uint64
	// idle says the last look found it idle longer than its RTO, with
	// idleCwnd its window then; sentSegs its data segments sent then.
	idle     bool
	idleCwnd uint32
	sentSegs uint32
}

// kcounters are a connection's cumulative counters, from tcp_info.
type kcounters struct {
	busy, rwnd, sndbuf                      uint64
	sent, retransBytes, acked, recv, segs   uint64
	retrans, rtos, rtoRecoveries, rtoTimeMS uint64
}

func countersOf(t *TCPInfo) kcounters {
	return kcounters{busy: t.BusyTime, rwnd: t.RwndLimited, sndbuf: t.SndbufLimited,
		sent: t.BytesSent, retransBytes: t.BytesRetrans, acked: t.BytesAcked, recv: t.BytesReceived, segs: uint64(t.DataSegsOut),
		retrans: uint64(t.TotalRetrans), rtos: uint64(t.TotalRTO), rtoRecoveries: uint64(t.TotalRTORecoveries), rtoTimeMS: uint64(t.TotalRTOTime)}
}

// add adds k (sign 1) or takes it away (-1) from c; a connection's own
// counters only rise, so taking away what was added before never goes
// below 0.
func (k kcounters) add(c *kernel.SenderCounters, sign int) {
	f := func(dst *uint64, v uint64) {
		if sign > 0 {
			*dst += v
		} else {
			*dst -= min(*dst, v)
		}
	}
	f(&c.BusyUS, k.busy)
	f(&c.RwndLimitedUS, k.rwnd)
	f(&c.SndbufLimitedUS, k.sndbuf)
	f(&c.BytesSent, k.sent)
	f(&c.BytesRetrans, k.retransBytes)
	f(&c.BytesAcked, k.acked)
	f(&c.BytesReceived, k.recv)
	f(&c.DataSegsOut, k.segs)
	f(&c.Retrans, k.retrans)
	f(&c.RTOs, k.rtos)
	f(&c.RTORecoveries, k.rtoRecoveries)
	f(&c.RTOTimeMS, k.rtoTimeMS)
}

// rise is k with every counter at least as high as before: a counter
// that went down (it cannot, but a kernel bug or a reused cookie must
// not make the sums go down) keeps its last value.
func (k kcounters) rise(last kcounters) kcounters {
	return kcounters{busy: max(k.busy, last.busy), rwnd: max(k.rwnd, last.rwnd), sndbuf: max(k.sndbuf, last.sndbuf),
		sent: max(k.sent, last.sent), retransBytes: max(k.retransBytes, last.retransBytes), acked: max(k.acked, last.acked),
		recv: max(k.recv, last.recv), segs: max(k.segs, last.segs), retrans: max(k.retrans, last.retrans),
		rtos: max(k.rtos, last.rtos), rtoRecoveries: max(k.rtoRecoveries, last.rtoRecoveries), rtoTimeMS: max(k.rtoTimeMS, last.rtoTimeMS)}
}

// NewSenders starts an accounting with no connection seen.
func NewSenders() *Senders {
	return &Senders{conns: map[uint64]*sender{}, gone: map[uint64]*sender{}, ended: map[uint64]uint64{}, acc: map[groupKey]*groupAcc{}}
}

// maxPeerGroups bounds the peers kept between snapshots: past it, the
// peers without an open connection that changed least recently are
// forgotten (their counters start again from 0 if they come back, with
// a new Since).
const maxPeerGroups = 4096

// initCwnd is TCP_INIT_CWND, the window a restart after idle goes back
// to (a route's initcwnd may set another: not read here).
const initCwnd = 10

// Round is one snapshot's look at every connection.
type Round struct {
	s       *Senders
	at      time.Time
	restart bool
	listen  *[65536 / 64]uint64
	top     connHeap
}

// gauge is a group's state at a round; cong counts its connections by
// congestion control, congNames's index (other holds the rest).
type gauge struct {
	open, zero     int
	sendQ, notSent uint64
	cong           [len(congNames)]int
	other          map[string]int
}

// congMap is the gauge's congestion controls by name.
func (g *gauge) congMap() map[string]int {
	var m map[string]int
	for i, n := range g.cong {
		if n > 0 {
			if m == nil {
				m = map[string]int{}
			}
			m[congNames[i]] = n
		}
	}
	for k, n := range g.other {
		if m == nil {
			m = map[string]int{}
		}
		m[k] += n
	}
	return m
}

// count adds a connection of congestion control cong.
func (g *gauge) count(cong string) {
	if cong == "" {
		return
	}
	if i, ok := slices.BinarySearch(congNames[:], cong); ok {
		g.cong[i]++
		return
	}
	if g.other == nil {
		g.other = map[string]int{}
	}
	g.other[cong]++
}

// Begin starts the round of the snapshot taken at at (the snapshot's own
// time: a group first seen in it is counted from it), with the
// namespace's listening ports; slowStartAfterIdle is
// net.ipv4.tcp_slow_start_after_idle, -1 when not known (the kernel's
// default, 1, is assumed).
func (s *Senders) Begin(at time.Time, listen *[65536 / 64]uint64, slowStartAfterIdle int) *Round {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gen++
	if s.since.IsZero() {
		s.since = at
	}
	if listen == nil {
		listen = new([65536 / 64]uint64)
	}
	s.listen = listen
	return &Round{s: s, at: at, restart: slowStartAfterIdle != 0, listen: listen}
}

func isListenPort(l *[65536 / 64]uint64, port uint16) bool {
	return l != nil && l[port/64]&(1<<(port%64)) != 0
}

// keys are a connection's groups: its listener's (when accepted here)
// and its peer's.
func keys(m *InetDiagMsg, listen *[65536 / 64]uint64) (l, p groupKey, inbound bool) {
	remote := addrOf(m.Family, m.Dst)
	if isListenPort(listen, m.SPort) {
		return groupKey{kind: groupListener, port: m.SPort}, groupKey{kind: groupClient, addr: remote}, true
	}
	return groupKey{}, groupKey{kind: groupDest, addr: remote, port: m.DPort}, false
}

func addrOf(family uint8, a [16]byte) netip.Addr {
	if family == afInet {
		return netip.AddrFrom4([4]byte(a[:4]))
	}
	return netip.AddrFrom16(a).Unmap()
}

// group returns the group's accumulator, made at t if new.
func (s *Senders) group(k groupKey, t time.Time) *groupAcc {
	g := s.acc[k]
	if g == nil {
		g = &groupAcc{since: t}
		s.acc[k] = g
	}
	g.touched = s.gen
	return g
}

// Look accounts one connection of the round's dump: a TCP socket with
// its tcp_info (others are ignored).
func (r *Round) Look(m *InetDiagMsg, c *ConnInfo) {
	if !c.HasInfo || m.State == stateListen || m.DPort == 0 {
		return
	}
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.ended[m.Cookie]; done {
		return
	}
	s.infoSize = c.Info.Size
	t := &c.Info
	cur := countersOf(t)
	sd := s.conns[m.Cookie]
	if sd == nil {
		sd = s.gone[m.Cookie]
		if sd != nil {
			// A dump that missed it (interrupted) made it gone: it is
			// open again, and its last look's counters move back from
			// the ended ones to the open ones.
			delete(s.gone, m.Cookie)
			sd.n = 0
			for _, k := range sd.groups() {
				g := s.group(k, r.at)
				sd.last.add(&g.c, -1)
				g.c.Left -= min(g.c.Left, 1)
				sd.accs[sd.n], sd.n = g, sd.n+1
			}
		} else {
			sd = &sender{}
			sd.listen, sd.peer, sd.inbound = keys(m, r.listen)
			for _, k := range sd.groups() {
				g := s.group(k, r.at)
				g.c.Conns++
				sd.accs[sd.n], sd.n = g, sd.n+1
			}
		}
		s.conns[m.Cookie] = sd
	}
	cur = cur.rise(sd.last)
	busySince := cur.busy - sd.last.busy
	if sd.gen == 0 {
		busySince = 0 // its first look: no interval to rank it by
	}
	sd.last, sd.gen = cur, s.gen

	var looked kernel.SenderCounters
	looked.Looks = 1
	looked.RTTSumUS = uint64(t.RTT)
	if mr, ok := t.MinRTTOK(); ok {
		looked.MinRTTSumUS = uint64(mr / time.Microsecond)
	}
	looked.CwndSum = uint64(t.SndCwnd)
	looked.SndWndSum = uint64(t.SndWnd)
	looked.SendQSum = uint64(m.WQueue)
	looked.NotSentSum = uint64(t.NotsentBytes)
	zero := t.HasSndWnd() && t.SndWnd == 0 || m.Timer == timerProbe
	if zero {
		looked.ZeroWindowLooks = 1
	}
	if c.SndbufFull() {
		looked.SndbufFullLooks = 1
	}
	sending := t.Unacked > 0 || t.NotsentBytes > 0 || m.WQueue > 0
	idle := !sending && t.RTO > 0 && uint64(t.LastDataSent)*1000 > uint64(t.RTO)
	switch {
	case sending:
		looked.SendingLooks = 1
		looked.CwndSendingSum = uint64(t.SndCwnd)
	case idle:
		looked.IdleLooks = 1
		looked.CwndIdleSum = uint64(t.SndCwnd)
	}
	// Idle longer than its RTO at the last look, data sent since: the
	// kernel's tcp_cwnd_restart ran at that send, where the setting and
	// the congestion control let it (BBR sets its own window:
	// cong_control), and cut a window above the initial one.
	if sd.idle && t.DataSegsOut != sd.sentSegs {
		looked.IdleResumes = 1
		if r.restart && !ownsCwnd(c.Cong) && sd.idleCwnd > initCwnd {
			looked.Restarts = 1
			looked.RestartCwndSum = uint64(sd.idleCwnd)
		}
	}
	sd.idle, sd.idleCwnd, sd.sentSegs = idle, t.SndCwnd, t.DataSegsOut
	for _, g := range sd.accs[:sd.n] {
		g.touched = s.gen
		g.c.Add(looked)
		if g.gaugeGen != s.gen {
			g.gaugeGen, g.gauge = s.gen, gauge{}
		}
		gg := &g.gauge
		gg.open++
		gg.sendQ += uint64(m.WQueue)
		gg.notSent += uint64(t.NotsentBytes)
		if zero {
			gg.zero++
		}
		gg.count(c.Cong)
	}
	r.top.offer(busySince, m, c, sd.inbound, cur)
}

// ownsCwnd reports whether a congestion control sets the window itself
// (struct tcp_congestion_ops's cong_control), which the kernel's restart
// after idle leaves alone: BBR.
func ownsCwnd(cong string) bool { return strings.HasPrefix(cong, "bbr") }

// timerProbe is idiag_timer 4: the zero-window probe timer.
const timerProbe = 4

func (sd *sender) groups() []groupKey {
	if sd.inbound {
		return []groupKey{sd.listen, sd.peer}
	}
	return []groupKey{sd.peer}
}

// End accounts the kernel's notice that a connection ended, with its
// last tcp_info (a message of the destroy broadcast).
func (s *Senders) End(m *InetDiagMsg, t *TCPInfo) {
	if m.DPort == 0 {
		return // never connected
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, done := s.ended[m.Cookie]; done {
		return
	}
	s.ended[m.Cookie] = s.gen
	s.infoSize = t.Size
	now := time.Now()
	final := countersOf(t)
	if sd := s.conns[m.Cookie]; sd != nil {
		delete(s.conns, m.Cookie)
		final = final.rise(sd.last)
		for _, k := range sd.groups() {
			g := s.group(k, now)
			final.add(&g.c, 1)
			g.c.Ended++
		}
		return
	}
	if sd := s.gone[m.Cookie]; sd != nil {
		// Accounted at its last look already: what it did since.
		delete(s.gone, m.Cookie)
		final = final.rise(sd.last)
		for _, k := range sd.groups() {
			g := s.group(k, now)
			final.add(&g.c, 1)
			sd.last.add(&g.c, -1)
			g.c.Ended++
			g.c.Left -= min(g.c.Left, 1)
		}
		return
	}
	// Never looked at: it began and ended between two looks (or before
	// the first).
	sd := &sender{}
	sd.listen, sd.peer, sd.inbound = keys(m, s.listen)
	for _, k := range sd.groups() {
		g := s.group(k, now)
		final.add(&g.c, 1)
		g.c.Conns++
		g.c.Ended++
		g.c.Unlooked++
	}
}

// endsState records the end watcher's state: on, or why not; lost
// counts the notices the kernel could not deliver.
func (s *Senders) endsState(on bool, why string, lost uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ends.on, s.ends.why = on, why
	s.ends.lost += lost
}

// Finish ends the round and returns the accounting. complete says the
// dump showed every connection: only then are those it did not show
// taken as gone (accounted at their last look).
func (r *Round) Finish(complete bool, note string) *kernel.Senders {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if complete {
		for ck, sd := range s.conns {
			if sd.gen == s.gen {
				continue
			}
			delete(s.conns, ck)
			s.gone[ck] = sd
			for _, k := range sd.groups() {
				g := s.group(k, r.at)
				sd.last.add(&g.c, 1)
				g.c.Left++
			}
		}
	}
	for ck, sd := range s.gone {
		if sd.gen+2 < s.gen {
			delete(s.gone, ck)
		}
	}
	for ck, gen := range s.ended {
		if gen+2 < s.gen {
			delete(s.ended, ck)
		}
	}
	for _, g := range s.acc {
		g.total = g.c
		if g.gaugeGen != s.gen {
			g.gauge = gauge{}
		}
	}
	for _, sd := range s.conns {
		for _, g := range sd.accs[:sd.n] {
			sd.last.add(&g.total, 1)
		}
	}
	s.prune()
	out := &kernel.Senders{Since: s.since, InfoSize: s.infoSize, Ends: s.ends.on, EndsUnavailable: s.ends.why, EndsLost: s.ends.lost, Note: note}
	type ranked struct {
		g    kernel.SenderGroup
		busy uint64
	}
	var peers []ranked
	for k, acc := range s.acc {
		g := kernel.SenderGroup{Since: acc.since, SenderCounters: acc.total}
		gg := &acc.gauge
		g.Open, g.SendQ, g.NotSent, g.ZeroWindow, g.Cong = gg.open, gg.sendQ, gg.notSent, gg.zero, gg.congMap()
		busy := g.BusyUS - min(g.BusyUS, acc.prevBusy)
		acc.prevBusy = g.BusyUS
		switch k.kind {
		case groupListener:
			g.Port = int(k.port)
			out.Listeners = append(out.Listeners, g)
		case groupClient:
			g.Peer, g.Inbound = k.addr.String(), true
			peers = append(peers, ranked{g, busy})
		default:
			g.Peer = netip.AddrPortFrom(k.addr, k.port).String()
			peers = append(peers, ranked{g, busy})
		}
	}
	slices.SortFunc(out.Listeners, func(a, b kernel.SenderGroup) int { return cmp.Compare(a.Port, b.Port) })
	slices.SortFunc(peers, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(b.busy, a.busy), cmp.Compare(b.g.Open, a.g.Open), cmp.Compare(a.g.Peer, b.g.Peer))
	})
	for _, p := range peers[:min(len(peers), kernel.MaxSenderPeers)] {
		out.Peers = append(out.Peers, p.g)
	}
	out.Conns = r.top.conns()
	return out
}

// prune forgets the peers past maxPeerGroups that have no open
// connection (none looked at in this round), those changed least
// recently first.
func (s *Senders) prune() {
	n := 0
	for k := range s.acc {
		if k.kind != groupListener {
			n++
		}
	}
	if n <= maxPeerGroups {
		return
	}
	var idle []groupKey
	for k := range s.acc {
		if k.kind != groupListener && s.acc[k].gaugeGen != s.gen {
			idle = append(idle, k)
		}
	}
	slices.SortFunc(idle, func(a, b groupKey) int { return cmp.Compare(s.acc[a].touched, s.acc[b].touched) })
	for _, k := range idle[:min(len(idle), n-maxPeerGroups)] {
		delete(s.acc, k)
	}
}

// connHeap keeps the MaxSenderConns connections busiest since their
// previous look, and among those as idle, the ones holding the most
// bytes either way (a receiver's unread Recv-Q, a sender's Send-Q): a
// min-heap on that rank, so that a dump of many connections keeps only a
// few of them.
type connHeap []topConn

type topConn struct {
	rank    uint64
	busy    uint64
	m       InetDiagMsg
	c       ConnInfo
	inbound bool
	k       kcounters
}

func (h connHeap) Len() int           { return len(h) }
func (h connHeap) Less(i, j int) bool { return h[i].rank < h[j].rank }
func (h connHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *connHeap) Push(x any)        { *h = append(*h, x.(topConn)) }
func (h *connHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (h *connHeap) offer(busy uint64, m *InetDiagMsg, c *ConnInfo, inbound bool, k kcounters) {
	// Busy microseconds first (a second's at most: 2^20), the bytes
	// queued below them.
	rank := min(busy, 1<<40)<<20 | min(uint64(m.WQueue)+uint64(m.RQueue), 1<<20-1)
	if len(*h) < kernel.MaxSenderConns {
		heap.Push(h, topConn{rank, busy, *m, *c, inbound, k})
		return
	}
	if rank > (*h)[0].rank {
		(*h)[0] = topConn{rank, busy, *m, *c, inbound, k}
		heap.Fix(h, 0)
	}
}

// timerNames are idiag_timer's values.
var timerNames = [...]string{1: "retransmit", 2: "keepalive", 3: "timewait", 4: "probe"}

func (h connHeap) conns() []kernel.SenderConn {
	if len(h) == 0 {
		return nil
	}
	top := slices.Clone(h)
	slices.SortFunc(top, func(a, b topConn) int {
		return cmp.Or(cmp.Compare(b.rank, a.rank), cmp.Compare(a.m.Cookie, b.m.Cookie))
	})
	out := make([]kernel.SenderConn, 0, len(top))
	for _, x := range top {
		t := &x.c.Info
		sc := kernel.SenderConn{
			Local: endpoint(x.m.Family, x.m.Src, x.m.SPort), Remote: endpoint(x.m.Family, x.m.Dst, x.m.DPort), Inbound: x.inbound,
			Cong: x.c.Cong, Cwnd: t.SndCwnd, MSS: t.SndMSS, SndWnd: t.SndWnd, RcvWnd: t.RcvWnd,
			SendQ: x.m.WQueue, NotSent: t.NotsentBytes, Unacked: t.Unacked, RecvQ: x.m.RQueue,
			SndBuf: x.c.SndBuf, WmemQueued: x.c.WmemQueued, RcvBuf: x.m.RcvBuf,
			RTTUS: t.RTT, RTOUS: t.RTO, DeliveryRate: t.DeliveryRate, AppLimited: t.AppLimited,
			Probes: t.Probes, Backoff: t.Backoff, LastSendMS: t.LastDataSent,
			BusyUS: x.k.busy, RwndLimitedUS: x.k.rwnd, SndbufLimitedUS: x.k.sndbuf, BytesSent: x.k.sent, BytesRetrans: x.k.retransBytes,
			Retrans: t.TotalRetrans, RTOs: t.TotalRTO, BusySinceUS: x.busy,
		}
		if int(x.m.State) < len(kernel.TCPStates) {
			sc.State = kernel.TCPStates[x.m.State]
		}
		if t.SndSsthresh < InfiniteSsthresh {
			sc.Ssthresh = t.SndSsthresh
		}
		if mr, ok := t.MinRTTOK(); ok {
			sc.MinRTTUS = uint32(mr / time.Microsecond)
		}
		if int(x.m.Timer) < len(timerNames) {
			sc.Timer = timerNames[x.m.Timer]
		}
		out = append(out, sc)
	}
	return out
}
