package dropmon

import (
	"net/netip"

	"github.com/netdoctor/netdoctor/internal/conntrack"
)

// Address families, as the kernel numbers them.
const (
	afInet  = 2
	afInet6 = 10
)

// ephemeralLow is where Linux's default ip_local_port_range begins.
const ephemeralLow = 32768

// tuple is a flow from a BPF key's fields: addresses of family (AF_INET
// in the first 4 bytes, or AF_INET6), ports in host order. An unknown
// family gives invalid addresses and the ports alone.
func tuple(family, proto uint8, saddr [16]byte, sport uint16, daddr [16]byte, dport uint16) conntrack.Tuple {
	var s, d netip.Addr
	switch family {
	case afInet:
		s, d = netip.AddrFrom4([4]byte(saddr[:4])), netip.AddrFrom4([4]byte(daddr[:4]))
	case afInet6:
		s, d = netip.AddrFrom16(saddr).Unmap(), netip.AddrFrom16(daddr).Unmap()
	}
	return conntrack.Tuple{Proto: proto, Src: netip.AddrPortFrom(s, sport), Dst: netip.AddrPortFrom(d, dport)}
}

// devKey is a device of a namespace.
type devKey struct {
	netns   uint32
	ifindex int32
}

// nameDevices names the ledger's devices from the drops' table, whose
// keys carry the device's name (the ledger's do not: 16 bytes less to
// hash for every drop).
func (c *Counts) nameDevices() {
	names := map[devKey]string{}
	for _, d := range c.Drops {
		if d.Ifindex != 0 {
			names[devKey{d.NetNS, d.Ifindex}] = d.Iface
		}
	}
	for i := range c.Ledger {
		l := &c.Ledger[i]
		l.Iface = names[devKey{l.NetNS, l.Ifindex}]
	}
}

// port is the port a ledger row counts for in the drops' ports, as the
// port table before the ledger counted them: the local socket's when
// there is one, else the packet's service port: its destination's, or
// its source's when only that one is below the ephemeral range (a
// server's reply, passing through or leaving).
func (l *RawLedger) port() (port uint16, socket, source bool) {
	if l.SockPort != 0 {
		return l.SockPort, true, false
	}
	sport, dport := l.Flow.Src.Port(), l.Flow.Dst.Port()
	if dport >= ephemeralLow && sport != 0 && sport < ephemeralLow {
		return sport, false, true
	}
	return dport, false, false
}

// portID is a drop's place and a port.
type portID struct {
	dropID
	port           uint16
	socket, source bool
}

// portDrops sums the ledger's rows by port, under the drops' keys they
// belong to: evidence.Drop.Ports.
func (c *Counts) portDrops() []RawDrop {
	at := make(map[portID]int, len(c.Ledger))
	var out []RawDrop
	for i := range c.Ledger {
		l := &c.Ledger[i]
		p, socket, source := l.port()
		if p == 0 {
			continue
		}
		k := portID{dropID{l.NetNS, l.Reason, l.Location, l.Ifindex, l.Ethertype, l.IPProto}, p, socket, source}
		j, ok := at[k]
		if !ok {
			j = len(out)
			at[k] = j
			out = append(out, RawDrop{NetNS: l.NetNS, Reason: l.Reason, Name: l.Name, Location: l.Location, Ifindex: l.Ifindex, Iface: l.Iface,
				Ethertype: l.Ethertype, IPProto: l.IPProto, Port: p, Socket: socket, SrcPort: source})
		}
		out[j].Packets += l.Packets
		out[j].Bytes += l.Bytes
	}
	return out
}

// tuple is the flow a retransmitting connection sends: from its local
// end to its remote one.
func (f RawFlow) tuple() conntrack.Tuple {
	fam := uint8(0)
	switch f.Family {
	case afInet:
		fam = afInet
	case afInet6:
		fam = afInet6
	}
	return tuple(fam, 6, f.Saddr, f.Sport, f.Daddr, f.Dport)
}
