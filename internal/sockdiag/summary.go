package sockdiag

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Kernel socket state numbers (include/net/tcp_states.h).
const (
	stateEstablished = 1
	stateTimeWait    = 6
	stateCloseWait   = 8
	stateListen      = 10
	numStates        = 13
)

const (
	afUnix  = 1
	afInet  = 2
	afInet6 = 10
)

// remoteKey identifies a remote endpoint without allocating.
type remoteKey struct {
	addr   [16]byte
	port   uint16
	family uint8
}

type remoteCount struct {
	established, timeWait, other, ephemeral int
}

// Summary aggregates dumped sockets into the counts netdoctor keeps. It
// is built to take 100k+ sockets per second: Add does not allocate unless
// it sees a new remote endpoint or a listener.
type Summary struct {
	// PortLow and PortHigh bound the ephemeral port range; sockets whose
	// local port falls inside count as Remote.Ephemeral. Zero disables it.
	PortLow, PortHigh uint16

	tcp  [numStates]int
	unix [numStates]int
	// listenPorts marks local ports with a TCP listener; a socket on such
	// a port was accepted, so its remote is a client, not a destination.
	listenPorts *[65536 / 64]uint64
	remotes     map[remoteKey]*remoteCount
	listeners   []kernel.Listener
	// inbound counts, per listening port, its accepted connections.
	inbound map[uint16]*inboundCount
	// drops are the non-listening sockets whose drop counter is above 0.
	drops []kernel.SocketDrops
}

type inboundCount struct {
	established, unread, closeWait int
}

// AddInet counts one TCP socket.
func (s *Summary) AddInet(m *InetDiagMsg) {
	if int(m.State) < numStates {
		s.tcp[m.State]++
	}
	if m.HasDrops && m.Drops > 0 && m.State != stateListen {
		s.addDrops(m, "tcp")
	}
	if m.State == stateListen {
		s.listeners = append(s.listeners, listener(m))
		if s.listenPorts == nil {
			s.listenPorts = new([65536 / 64]uint64)
		}
		s.listenPorts[m.SPort/64] |= 1 << (m.SPort % 64)
		return
	}
	if s.listenPorts != nil && s.listenPorts[m.SPort/64]&(1<<(m.SPort%64)) != 0 {
		s.addInbound(m)
		return
	}
	if s.remotes == nil {
		s.remotes = make(map[remoteKey]*remoteCount)
	}
	k := remoteKey{addr: m.Dst, port: m.DPort, family: m.Family}
	if m.Family == afInet {
		clear(k.addr[4:]) // the kernel leaves the tail of an IPv4 address undefined
	}
	c := s.remotes[k]
	if c == nil {
		c = &remoteCount{}
		s.remotes[k] = c
	}
	switch m.State {
	case stateEstablished:
		c.established++
	case stateTimeWait:
		c.timeWait++
	default:
		c.other++
	}
	if s.PortLow != 0 && m.SPort >= s.PortLow && m.SPort <= s.PortHigh {
		c.ephemeral++
	}
}

// AddUDP keeps a UDP socket that dropped datagrams; the others are not
// counted.
func (s *Summary) AddUDP(m *InetDiagMsg) {
	if m.HasDrops && m.Drops > 0 {
		s.addDrops(m, "udp")
	}
}

func (s *Summary) addDrops(m *InetDiagMsg, proto string) {
	if m.Family == afInet6 {
		proto += "6"
	}
	d := kernel.SocketDrops{Proto: proto, Local: endpoint(m.Family, m.Src, m.SPort), Inode: uint64(m.Inode),
		Drops: uint64(m.Drops), RcvBuf: m.RcvBuf, RmemAlloc: m.RmemAlloc, RecvQ: m.RQueue}
	if m.DPort != 0 {
		d.Remote = endpoint(m.Family, m.Dst, m.DPort)
	}
	s.drops = append(s.drops, d)
}

// addInbound counts a connection on a listening port: a worker pool's
// queued requests are the connections whose request nobody has read yet,
// in the accept queue or accepted.
func (s *Summary) addInbound(m *InetDiagMsg) {
	if m.State != stateEstablished && m.State != stateCloseWait {
		return
	}
	if s.inbound == nil {
		s.inbound = make(map[uint16]*inboundCount)
	}
	c := s.inbound[m.SPort]
	if c == nil {
		c = &inboundCount{}
		s.inbound[m.SPort] = c
	}
	if m.State == stateCloseWait {
		c.closeWait++
		return
	}
	c.established++
	if m.RQueue > 0 {
		c.unread++
	}
}

// AddUnix counts one unix socket; only stream sockets are kept.
func (s *Summary) AddUnix(m *UnixDiagMsg) {
	const sockStream = 1
	if m.Type != sockStream {
		return
	}
	if int(m.State) < numStates {
		s.unix[m.State]++
	}
	if m.State == stateListen {
		s.listeners = append(s.listeners, kernel.Listener{
			Proto: "unix", Addr: m.Name, RecvQ: m.RQueue, SendQ: m.WQueue, Inode: uint64(m.Inode),
		})
	}
}

func listener(m *InetDiagMsg) kernel.Listener {
	l := kernel.Listener{Proto: "tcp", Port: int(m.SPort), RecvQ: m.RQueue, SendQ: m.WQueue, Inode: uint64(m.Inode), Drops: uint64(m.Drops)}
	if m.Family == afInet6 {
		l.Proto = "tcp6"
	}
	l.Addr = endpoint(m.Family, m.Src, m.SPort)
	return l
}

// endpoint formats an address and port as "10.0.0.1:80" or "[::1]:80".
func endpoint(family uint8, addr [16]byte, port uint16) string {
	var a netip.Addr
	if family == afInet {
		a = netip.AddrFrom4([4]byte(addr[:4]))
	} else {
		a = netip.AddrFrom16(addr)
	}
	return netip.AddrPortFrom(a, port).String()
}

// Sockets returns the aggregate. Listeners are sorted by address; remotes
// by connection count, busiest first, cut to kernel.MaxRemotes.
func (s *Summary) Sockets() *kernel.Sockets {
	out := &kernel.Sockets{TCP: stateMap(s.tcp[:]), Unix: stateMap(s.unix[:]), Listeners: s.listeners}
	if out.Listeners == nil {
		out.Listeners = []kernel.Listener{}
	}
	for i := range out.Listeners {
		l := &out.Listeners[i]
		if c := s.inbound[uint16(l.Port)]; c != nil && l.Proto != "unix" {
			l.Established, l.Unread, l.CloseWait = c.established, c.unread, c.closeWait
		}
	}
	slices.SortFunc(out.Listeners, func(a, b kernel.Listener) int {
		return cmp.Or(cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.Port, b.Port), cmp.Compare(a.Addr, b.Addr))
	})
	for k, c := range s.remotes {
		out.Remotes = append(out.Remotes, kernel.Remote{
			Addr: endpoint(k.family, k.addr, k.port), Established: c.established,
			TimeWait: c.timeWait, Other: c.other, Ephemeral: c.ephemeral,
		})
	}
	slices.SortFunc(out.Remotes, func(a, b kernel.Remote) int {
		ta, tb := a.Established+a.TimeWait+a.Other, b.Established+b.TimeWait+b.Other
		return cmp.Or(cmp.Compare(tb, ta), cmp.Compare(a.Addr, b.Addr))
	})
	if len(out.Remotes) > kernel.MaxRemotes {
		out.Remotes = out.Remotes[:kernel.MaxRemotes]
	}
	if len(s.drops) > 0 {
		out.Drops = slices.Clone(s.drops)
		slices.SortFunc(out.Drops, func(a, b kernel.SocketDrops) int {
			return cmp.Or(cmp.Compare(b.Drops, a.Drops), cmp.Compare(a.Local, b.Local), cmp.Compare(a.Inode, b.Inode))
		})
		out.Drops = out.Drops[:min(len(out.Drops), kernel.MaxSocketDrops)]
	}
	return out
}

func stateMap(counts []int) map[string]int {
	m := make(map[string]int)
	for st, n := range counts {
		if n == 0 {
			continue
		}
		name := "STATE_" + strconv.Itoa(st)
		if st < len(kernel.TCPStates) && kernel.TCPStates[st] != "" {
			name = kernel.TCPStates[st]
		}
		m[name] = n
	}
	return m
}
