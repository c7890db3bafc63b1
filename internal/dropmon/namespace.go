package dropmon

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/conntrack"
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
	var elsewhere []evidence.Retrans
	for _, f := range c.Flows {
		r := evidence.Retrans{
			Local: addrPort(f.Family, f.Saddr, f.Sport), Remote: addrPort(f.Family, f.Daddr, f.Dport),
			Segments: f.Skbs, Bytes: f.Bytes, Full: f.Full, MaxLen: f.MaxLen, MSS: f.MSS}
		if j, ok := c.Joins[f.tuple()]; ok {
			o := flowOf(j.Orig)
			r.Orig, r.Reply, r.Via, r.ViaNetNS, r.ViaNetNSName = &o, j.Reply, evidence.ViaConntrack, j.NetNS, names[j.NetNS]
		}
		if uint64(f.NetNS) == ino {
			out.Retrans = append(out.Retrans, r)
			continue
		}
		r.NetNS = uint64(f.NetNS)
		r.NetNSName = names[r.NetNS]
		elsewhere = append(elsewhere, r)
	}
	sortRetrans(out.Retrans)
	out.Retrans = out.Retrans[:min(len(out.Retrans), evidence.MaxRetransFlows)]

	var ledger, ledgerElsewhere []evidence.FlowDrop
	for _, l := range c.Ledger {
		d := c.flowDrop(l, names)
		if uint64(l.NetNS) == ino {
			ledger = append(ledger, d)
			continue
		}
		d.NetNS, d.NetNSName = uint64(l.NetNS), names[uint64(l.NetNS)]
		ledgerElsewhere = append(ledgerElsewhere, d)
	}
	ledger = mergeLedger(ledger)
	sortLedger(ledger)
	out.Ledger = ledger[:min(len(ledger), evidence.MaxLedger)]
	// What happens elsewhere to this namespace's flows comes first:
	// its server's drops, its clients' retransmissions.
	own := map[evidence.FlowKey]bool{}
	for _, d := range out.Ledger {
		own[d.Client().Key()] = true
	}
	for _, r := range out.Retrans {
		own[r.Client().Key()] = true
	}
	ledgerElsewhere = mergeLedger(ledgerElsewhere)
	sortLedger(ledgerElsewhere)
	slices.SortStableFunc(ledgerElsewhere, func(a, b evidence.FlowDrop) int {
		return cmp.Compare(rank(own[b.Client().Key()]), rank(own[a.Client().Key()]))
	})
	out.LedgerElsewhere = ledgerElsewhere[:min(len(ledgerElsewhere), evidence.MaxLedgerElsewhere)]
	sortRetrans(elsewhere)
	slices.SortStableFunc(elsewhere, func(a, b evidence.Retrans) int {
		return cmp.Compare(rank(own[b.Client().Key()]), rank(own[a.Client().Key()]))
	})
	out.RetransElsewhere = elsewhere[:min(len(elsewhere), evidence.MaxRetransElsewhere)]

	out.LedgerTable = flowTable(c.LedgerSize, len(c.Ledger), c.Stats[statLedgerNew], c.Stats[statLedgerOverflow])
	out.RetransTable = flowTable(c.RetransSize, len(c.Flows), c.Stats[statRetransNew], c.Stats[statRetransOverflow])
	if js := c.JoinStatus; js != (JoinStatus{}) {
		out.Join = &evidence.FlowJoin{Namespaces: js.Namespaces, Lookups: js.Lookups, Pending: js.Pending, Error: js.Errors}
	}
	return out
}

// rank orders what is true first.
func rank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// flowTable is a per-flow table's bookkeeping: what it inserted and no
// longer holds was evicted.
func flowTable(size, rows int, inserted, refused uint64) *evidence.FlowTable {
	if size == 0 {
		return nil
	}
	t := &evidence.FlowTable{Size: size, Rows: rows, Inserted: inserted, Refused: refused}
	if inserted > uint64(rows) {
		t.Evicted = inserted - uint64(rows)
	}
	return t
}

// flowDrop is a ledger row as evidence, its flow followed through NAT.
func (c *Counts) flowDrop(l RawLedger, names map[uint64]string) evidence.FlowDrop {
	d := evidence.FlowDrop{Reason: l.Name, Location: l.Func, Iface: l.Iface, Ifindex: int(l.Ifindex),
		Flow: flowOf(l.Flow), FromSocket: l.FromSock, SocketPort: int(l.SockPort),
		Packets: l.Packets, Bytes: l.Bytes, MaxLen: l.MaxLen}
	switch j, ok := c.Joins[l.Flow]; {
	case l.HasCT:
		o := flowOf(l.CT)
		d.Orig, d.Reply, d.Via = &o, l.CTReply, evidence.ViaSkb
	case ok:
		o := flowOf(j.Orig)
		d.Orig, d.Reply, d.Via, d.ViaNetNS, d.ViaNetNSName = &o, j.Reply, evidence.ViaConntrack, j.NetNS, names[j.NetNS]
	}
	return d
}

// mergeLedger adds up the rows that name the same flow at the same
// place: two call sites of one function are one location.
func mergeLedger(ds []evidence.FlowDrop) []evidence.FlowDrop {
	at := map[evidence.FlowDropKey]int{}
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
		m.MaxLen = max(m.MaxLen, d.MaxLen)
	}
	return out
}

// sortLedger sorts drops by flow busiest first, in a stable order.
func sortLedger(ds []evidence.FlowDrop) {
	slices.SortFunc(ds, func(a, b evidence.FlowDrop) int {
		return cmp.Or(cmp.Compare(b.Packets, a.Packets), cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.Location, b.Location),
			cmp.Compare(a.Iface, b.Iface), cmp.Compare(a.NetNS, b.NetNS), cmp.Compare(a.Flow.Src, b.Flow.Src), cmp.Compare(a.Flow.Dst, b.Flow.Dst),
			cmp.Compare(a.Flow.Proto, b.Flow.Proto), cmp.Compare(a.SocketPort, b.SocketPort))
	})
}

// sortRetrans sorts retransmitting connections busiest first, in a
// stable order.
func sortRetrans(rs []evidence.Retrans) {
	slices.SortFunc(rs, func(a, b evidence.Retrans) int {
		return cmp.Or(cmp.Compare(b.Segments, a.Segments), cmp.Compare(a.NetNS, b.NetNS), cmp.Compare(a.Local, b.Local), cmp.Compare(a.Remote, b.Remote))
	})
}

// flowOf is a flow as evidence.
func flowOf(t conntrack.Tuple) evidence.Flow {
	return evidence.Flow{Proto: protoName(t.Proto), Src: endpoint(t.Src), Dst: endpoint(t.Dst)}
}

// endpoint formats one end of a flow: 10.0.0.1:80, [fe80::1]:80, or
// :80 when the address is unknown.
func endpoint(a netip.AddrPort) string {
	if !a.Addr().IsValid() {
		return ":" + strconv.Itoa(int(a.Port()))
	}
	return a.String()
}

// protoName names a transport protocol.
func protoName(p uint8) string {
	if p == 0 {
		return ""
	}
	return proto(0x0800, p)
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
