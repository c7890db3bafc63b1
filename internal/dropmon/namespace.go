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
	ports := map[dropID][]evidence.DropPort{}
	for _, p := range c.Ports {
		k := p.id()
		ports[k] = append(ports[k], evidence.DropPort{Port: int(p.Port), Socket: p.Socket, Source: p.SrcPort, Packets: p.Packets})
	}
	for _, d := range c.Drops {
		e := evidence.Drop{Reason: d.Name, Location: d.Func, Proto: proto(d.Ethertype, d.IPProto), Iface: d.Iface,
			Packets: d.Packets, Bytes: d.Bytes}
		if ps := ports[d.id()]; len(ps) > 0 {
			e.Ports = slices.Clone(first(ps, evidence.MaxDropPorts, func(a, b evidence.DropPort) int {
				return cmp.Or(cmp.Compare(b.Packets, a.Packets), cmp.Compare(a.Port, b.Port))
			}))
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
	c.flows(out, ino, names)
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

// dropID is what a drop's key is without its name: where it died.
type dropID struct {
	netns, reason uint32
	location      uint64
	ifindex       int32
	ethertype     uint16
	ipproto       uint8
}

func (d *RawDrop) id() dropID {
	return dropID{d.NetNS, d.Reason, d.Location, d.Ifindex, d.Ethertype, d.IPProto}
}

// canon is a flow whichever way round: its two ends in a fixed order
// (evidence.FlowKey's, before formatting).
func canon(t conntrack.Tuple) conntrack.Tuple {
	if t.Src.Compare(t.Dst) > 0 {
		return t.Reverse()
	}
	return t
}

// ledgerID is what tells a ledger row's place and flow, a function's
// call sites as one.
type ledgerID struct {
	netns, reason uint32
	fn            string
	ifindex       int32
	flow          conntrack.Tuple
	fromSock      bool
	sockPort      uint16
}

// ledgerRow is a row of the ledger as the view sorts it: merged, its
// client's flow known, formatted only if shown.
type ledgerRow struct {
	l       *RawLedger
	fn      string
	packets uint64
	bytes   uint64
	maxLen  uint32
	client  conntrack.Tuple // canonical
	join    *Join
	related bool
}

// retransRow is a retransmitting connection as the view sorts it.
type retransRow struct {
	f       *RawFlow
	client  conntrack.Tuple // canonical
	join    *Join
	related bool
}

// flows fills the view's per-flow lists: the ledger's rows and the
// retransmitting connections of the namespace, and the other
// namespaces' with this one's flows first. The rows are chosen before
// they are formatted: a full ledger is 16 384 of them, a view shows 192.
func (c *Counts) flows(out *evidence.Drops, ino uint64, names map[uint64]string) {
	// Rows merge only where one function frees at two call sites: the
	// others, nearly all, are one row each.
	fnAt := map[string]uint64{}
	shared := map[uint64]bool{}
	name := func(l *RawLedger) string {
		if l.Func != "" {
			return l.Func
		}
		return c.Funcs[l.Location]
	}
	prev := uint64(0)
	for i := range c.Ledger {
		l := &c.Ledger[i]
		if i > 0 && l.Location == prev {
			continue
		}
		prev = l.Location
		fn := name(l)
		if loc, ok := fnAt[fn]; ok && loc != l.Location {
			shared[loc], shared[l.Location] = true, true
		}
		fnAt[fn] = l.Location
	}
	at := map[ledgerID]int{}
	var own, other []ledgerRow
	for i := range c.Ledger {
		l := &c.Ledger[i]
		fn := name(l)
		rows := &other
		if uint64(l.NetNS) == ino {
			rows = &own
		}
		var id ledgerID
		if shared[l.Location] {
			id = ledgerID{l.NetNS, l.Reason, fn, l.Ifindex, l.Flow, l.FromSock, l.SockPort}
			if k, ok := at[id]; ok {
				r := &(*rows)[k]
				r.packets += l.Packets
				r.bytes += l.Bytes
				r.maxLen = max(r.maxLen, l.MaxLen)
				continue
			}
			at[id] = len(*rows)
		}
		r := ledgerRow{l: l, fn: fn, packets: l.Packets, bytes: l.Bytes, maxLen: l.MaxLen, client: l.Flow}
		switch j, ok := c.Joins[l.Flow]; {
		case l.HasCT:
			r.client = l.CT
		case ok:
			r.join, r.client = &j, j.Orig
		}
		r.client = canon(r.client)
		*rows = append(*rows, r)
	}
	var ownRe, otherRe []retransRow
	for i := range c.Flows {
		f := &c.Flows[i]
		r := retransRow{f: f, client: f.tuple()}
		if j, ok := c.Joins[r.client]; ok {
			r.join, r.client = &j, j.Orig
		}
		r.client = canon(r.client)
		if uint64(f.NetNS) == ino {
			ownRe = append(ownRe, r)
		} else {
			otherRe = append(otherRe, r)
		}
	}
	// What happens elsewhere to this namespace's flows comes first:
	// its server's drops, its clients' retransmissions.
	mine := make(map[conntrack.Tuple]bool, len(own)+len(ownRe))
	for _, r := range own {
		mine[r.client] = true
	}
	for _, r := range ownRe {
		mine[r.client] = true
	}
	for i := range other {
		other[i].related = mine[other[i].client]
	}
	for i := range otherRe {
		otherRe[i].related = mine[otherRe[i].client]
	}
	out.Ledger = c.ledgerRows(own, evidence.MaxLedger, 0, names)
	out.LedgerElsewhere = c.ledgerRows(other, evidence.MaxLedgerElsewhere, ino, names)
	out.Retrans = retransRows(ownRe, evidence.MaxRetransFlows, 0, names)
	out.RetransElsewhere = retransRows(otherRe, evidence.MaxRetransElsewhere, ino, names)
}

// ledgerRows sorts rows, related first then the busiest, in a stable
// order, and formats the first n. A namespace other than this one
// (this non-zero) is named on each row.
func (c *Counts) ledgerRows(rows []ledgerRow, n int, this uint64, names map[uint64]string) []evidence.FlowDrop {
	rows = first(rows, n, compareLedgerRows)
	var out []evidence.FlowDrop
	for _, r := range rows[:min(len(rows), n)] {
		l := r.l
		d := evidence.FlowDrop{Reason: l.Name, Location: r.fn, Iface: l.Iface, Ifindex: int(l.Ifindex),
			Flow: flowOf(l.Flow), FromSocket: l.FromSock, SocketPort: int(l.SockPort),
			Packets: r.packets, Bytes: r.bytes, MaxLen: r.maxLen}
		switch {
		case l.HasCT:
			o := flowOf(l.CT)
			d.Orig, d.Reply, d.Via = &o, l.CTReply, evidence.ViaSkb
		case r.join != nil:
			o := flowOf(r.join.Orig)
			d.Orig, d.Reply, d.Via, d.ViaNetNS, d.ViaNetNSName = &o, r.join.Reply, evidence.ViaConntrack, r.join.NetNS, names[r.join.NetNS]
		}
		if this != 0 {
			d.NetNS, d.NetNSName = uint64(l.NetNS), names[uint64(l.NetNS)]
		}
		out = append(out, d)
	}
	return out
}

// retransRows sorts retransmitting connections, related first then the
// busiest, in a stable order, and formats the first n.
func retransRows(rows []retransRow, n int, this uint64, names map[uint64]string) []evidence.Retrans {
	rows = first(rows, n, compareRetransRows)
	var out []evidence.Retrans
	for _, r := range rows[:min(len(rows), n)] {
		f := r.f
		e := evidence.Retrans{
			Local: addrPort(f.Family, f.Saddr, f.Sport), Remote: addrPort(f.Family, f.Daddr, f.Dport),
			Segments: f.Skbs, Bytes: f.Bytes, Full: f.Full, MaxLen: f.MaxLen, MSS: f.MSS}
		if j := r.join; j != nil {
			o := flowOf(j.Orig)
			e.Orig, e.Reply, e.Via, e.ViaNetNS, e.ViaNetNSName = &o, j.Reply, evidence.ViaConntrack, j.NetNS, names[j.NetNS]
		}
		if this != 0 {
			e.NetNS, e.NetNSName = uint64(f.NetNS), names[uint64(f.NetNS)]
		}
		out = append(out, e)
	}
	return out
}

// compareLedgerRows orders rows related first, then the busiest, then
// by place and flow: a stable order. (Written out rather than with
// cmp.Or, which would compare every field of thousands of rows.)
func compareLedgerRows(a, b ledgerRow) int {
	if a.related != b.related {
		return cmp.Compare(rank(b.related), rank(a.related))
	}
	if a.packets != b.packets {
		return cmp.Compare(b.packets, a.packets)
	}
	x, y := a.l, b.l
	switch {
	case x.NetNS != y.NetNS:
		return cmp.Compare(x.NetNS, y.NetNS)
	case x.Reason != y.Reason:
		return cmp.Compare(x.Reason, y.Reason)
	case a.fn != b.fn:
		return cmp.Compare(a.fn, b.fn)
	case x.Ifindex != y.Ifindex:
		return cmp.Compare(x.Ifindex, y.Ifindex)
	case x.Flow.Src != y.Flow.Src:
		return x.Flow.Src.Compare(y.Flow.Src)
	case x.Flow.Dst != y.Flow.Dst:
		return x.Flow.Dst.Compare(y.Flow.Dst)
	case x.Flow.Proto != y.Flow.Proto:
		return cmp.Compare(x.Flow.Proto, y.Flow.Proto)
	}
	return cmp.Compare(x.SockPort, y.SockPort)
}

// compareRetransRows orders connections related first, then the
// busiest, then by namespace and ends.
func compareRetransRows(a, b retransRow) int {
	if a.related != b.related {
		return cmp.Compare(rank(b.related), rank(a.related))
	}
	x, y := a.f, b.f
	switch {
	case x.Skbs != y.Skbs:
		return cmp.Compare(y.Skbs, x.Skbs)
	case x.NetNS != y.NetNS:
		return cmp.Compare(x.NetNS, y.NetNS)
	case x.Saddr != y.Saddr:
		return slices.Compare(x.Saddr[:], y.Saddr[:])
	case x.Sport != y.Sport:
		return cmp.Compare(x.Sport, y.Sport)
	case x.Daddr != y.Daddr:
		return slices.Compare(x.Daddr[:], y.Daddr[:])
	}
	return cmp.Compare(x.Dport, y.Dport)
}

// first returns the n first of rows in the order cmp gives, sorted: a
// bounded heap of the best seen, so that choosing 128 rows of 16 384
// costs one comparison for most of them, not a sort of them all.
func first[T any](rows []T, n int, cmp func(a, b T) int) []T {
	if len(rows) <= n {
		slices.SortFunc(rows, cmp)
		return rows
	}
	if n <= 0 {
		return nil
	}
	// h is a heap whose root is the worst of the best n.
	h := slices.Clone(rows[:n])
	worse := func(i, j int) bool { return cmp(h[i], h[j]) > 0 }
	down := func(i int) {
		for {
			l, w := 2*i+1, i
			if l < n && worse(l, w) {
				w = l
			}
			if r := l + 1; r < n && worse(r, w) {
				w = r
			}
			if w == i {
				return
			}
			h[i], h[w] = h[w], h[i]
			i = w
		}
	}
	for i := n/2 - 1; i >= 0; i-- {
		down(i)
	}
	for _, r := range rows[n:] {
		if cmp(r, h[0]) < 0 {
			h[0] = r
			down(0)
		}
	}
	slices.SortFunc(h, cmp)
	return h
}
