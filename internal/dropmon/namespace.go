package dropmon

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// Namespace is what the counts hold for the namespace of inode ino:
// its drops and retransmissions, and the drops of the host's other
// namespaces (Elsewhere), named by names (inode → `ip netns` name) when
// they have one. Every list is bounded (evidence.MaxDrops…), the
// busiest kept.
func (c *Counts) Namespace(ino uint64, names map[uint64]string) *evidence.Drops {
	out := &evidence.Drops{Seen: c.Stats[statDrops], Overflow: c.Stats[statDropsOverflow], RetransOverflow: c.Stats[statRetransOverflow]}
	ports := map[RawDrop][]evidence.DropPort{}
	for _, p := range c.Ports {
		k := p
		k.Port, k.Socket, k.SrcPort, k.Packets, k.Bytes = 0, false, false, 0, 0
		ports[k] = append(ports[k], evidence.DropPort{Port: int(p.Port), Socket: p.Socket, Source: p.SrcPort, Packets: p.Packets})
	}
	for _, d := range c.Drops {
		k := d
		k.Packets, k.Bytes = 0, 0
		e := evidence.Drop{Reason: d.Name, Location: d.Func, Proto: proto(d.Ethertype, d.IPProto), Iface: d.Iface,
			Packets: d.Packets, Bytes: d.Bytes}
		if ps := ports[k]; len(ps) > 0 {
			slices.SortFunc(ps, func(a, b evidence.DropPort) int {
				return cmp.Or(cmp.Compare(b.Packets, a.Packets), cmp.Compare(a.Port, b.Port))
			})
			e.Ports = slices.Clone(ps[:min(len(ps), evidence.MaxDropPorts)])
		}
		if uint64(d.NetNS) == ino {
			out.Counts = append(out.Counts, e)
			continue
		}
		e.NetNS = uint64(d.NetNS)
		e.NetNSName = names[e.NetNS]
		out.Elsewhere = append(out.Elsewhere, e)
	}
	out.Counts = busiest(merge(out.Counts))
	out.Elsewhere = busiest(merge(out.Elsewhere))
	for _, f := range c.Flows {
		if uint64(f.NetNS) != ino {
			continue
		}
		out.Retrans = append(out.Retrans, evidence.Retrans{
			Local: addrPort(f.Family, f.Saddr, f.Sport), Remote: addrPort(f.Family, f.Daddr, f.Dport),
			Segments: f.Skbs, Bytes: f.Bytes, Full: f.Full, MaxLen: f.MaxLen, MSS: f.MSS})
	}
	slices.SortFunc(out.Retrans, func(a, b evidence.Retrans) int {
		return cmp.Or(cmp.Compare(b.Segments, a.Segments), cmp.Compare(a.Local, b.Local), cmp.Compare(a.Remote, b.Remote))
	})
	out.Retrans = out.Retrans[:min(len(out.Retrans), evidence.MaxRetransFlows)]
	return out
}

// merge adds up the rows that name the same place: two call sites of
// one function (ip6_mc_input frees at two addresses) are one location.
func merge(ds []evidence.Drop) []evidence.Drop {
	at := map[evidence.DropKey]int{}
	out := ds[:0]
	for _, d := range ds {
		i, ok := at[d.Key()]
		if !ok {
			at[d.Key()] = len(out)
			out = append(out, d)
			continue
		}
		m := &out[i]
		m.Packets += d.Packets
		m.Bytes += d.Bytes
		m.Ports = mergePorts(m.Ports, d.Ports)
	}
	return out
}

// mergePorts adds up two rows' ports, the busiest evidence.MaxDropPorts
// kept.
func mergePorts(a, b []evidence.DropPort) []evidence.DropPort {
	out := slices.Clone(a)
	for _, p := range b {
		i := slices.IndexFunc(out, func(q evidence.DropPort) bool {
			return q.Port == p.Port && q.Socket == p.Socket && q.Source == p.Source
		})
		if i < 0 {
			out = append(out, p)
		} else {
			out[i].Packets += p.Packets
		}
	}
	slices.SortFunc(out, func(a, b evidence.DropPort) int {
		return cmp.Or(cmp.Compare(b.Packets, a.Packets), cmp.Compare(a.Port, b.Port))
	})
	return out[:min(len(out), evidence.MaxDropPorts)]
}

// busiest sorts drops busiest first, in a stable order, and keeps
// evidence.MaxDrops of them.
func busiest(ds []evidence.Drop) []evidence.Drop {
	slices.SortFunc(ds, func(a, b evidence.Drop) int {
		return cmp.Or(cmp.Compare(b.Packets, a.Packets), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Location, b.Location),
			cmp.Compare(a.Iface, b.Iface), cmp.Compare(a.Proto, b.Proto), cmp.Compare(a.NetNS, b.NetNS))
	})
	return ds[:min(len(ds), evidence.MaxDrops)]
}

// proto names a packet's protocol: its IP protocol when it is IP and the
// header was read, else its link protocol.
func proto(ethertype uint16, ipproto uint8) string {
	switch ethertype {
	case 0x0800, 0x86dd:
		switch ipproto {
		case 6:
			return "tcp"
		case 17:
			return "udp"
		case 1:
			return "icmp"
		case 58:
			return "icmpv6"
		case 132:
			return "sctp"
		case 2:
			return "igmp"
		case 0:
			if ethertype == 0x0800 {
				return "ipv4"
			}
			// 0 is also IPv6's hop-by-hop header, which ends the
			// monitor's reading: the payload is unknown.
			return "ipv6"
		}
		return "ip proto " + strconv.Itoa(int(ipproto))
	case 0x0806:
		return "arp"
	case 0:
		return ""
	}
	return fmt.Sprintf("0x%04x", ethertype)
}

// addrPort formats a flow's end as 10.0.0.1:80 or [fe80::1]:80.
func addrPort(family uint16, a [16]byte, port uint16) string {
	switch family {
	case 2: // AF_INET
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[:4])), port).String()
	case 10: // AF_INET6
		return netip.AddrPortFrom(netip.AddrFrom16(a).Unmap(), port).String()
	}
	return ":" + strconv.Itoa(int(port))
}
