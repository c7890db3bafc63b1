package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// FirewallDrop: a firewall rule drops or rejects a service's packets.
const FirewallDrop report.FindingID = "firewall-drop"

// PacketDrops: the kernel drops packets for a reason no other finding
// names, at a place it tells.
const PacketDrops report.FindingID = "packet-drops"

var _ = define(Class{ID: FirewallDrop,
	DropReasons: []string{"NETFILTER_DROP"},
	Critical:    true,
	Errors:      true, Delays: true, Latency: true, Drops: true, Fails: FailsConnections,
	Meaning:    "a firewall rule (nftables, or iptables-nft) drops or rejects a service's packets; named with its matches and the counter that moved",
	Active:     "a counted drop/reject rule's counter rose, or the drop monitor saw `NETFILTER_DROP`, ≥ 20 packets and ≥ 1/s, on a rate limit, a listening port or in a run (warning; critical at ≥ 10/s in a run or behind a rate limit)",
	LatentWhen: "none",
	Seed:       "001 §6 (rate-limiting SYNs)",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´drops´ (´drops.go´, ´firewallFinding´). It reads the namespace's nftables rules that can
discard a packet — a ´drop´ or ´reject´ verdict, a rate ´limit´, a random drop (iptables' ´statistic´) —
and the base chains whose policy drops, over netlink (´internal/nftables´, with
github.com/google/nftables) in every snapshot, with their counters. iptables-nft's rules (Debian's
´iptables´) are nftables rules too, in tables ´filter´, ´nat´, ´mangle´, ´raw´ and ´security´: they are
named in both syntaxes (´tcp flags syn / fin,syn,rst,ack tcp dport 80 drop´, ´-A INPUT -p tcp --syn
--dport 80 -j DROP´), their xt matches (´limit´, ´hashlimit´, ´statistic´, ´icmp´, ´conntrack´) decoded.
iptables-legacy's rules are not read.

- A rule whose counter rose in the window, with a ´drop´ or ´reject´ verdict, is a **moved** rule. The drop
  monitor's ´NETFILTER_DROP´ drops in the namespace, less conntrack's own (´conntrack drop´, which
  ´conntrack-table-full´ names), are netfilter's drops.
- **Active** when the moved rules' packets (or, without one, netfilter's drops) are at least 20 and one
  a second, and the drops concern a service: in a run (the load's traffic), a rule that limits a rate or
  drops what a rate limit in front of it let fall through (iptables' ´-m limit … -j ACCEPT´ then ´-j DROP´),
  a port with a listener or a local socket, or, when the kernel named no port, at least 10 a second.
  Packets to ports nothing serves (a scan on a host whose policy drops) are the firewall doing its job:
  no finding. **Critical** at 10 drops a second or more in a run or behind a rate limit (clients the
  service should serve), else warning (a ban list dropping one attacker's packets is the firewall's job).
- The subject is ´family table chain´ of the busiest moved rule, or ´netfilter´ when none moved. Evidence:
  each moved rule (up to three), ´ip filter INPUT (hook input): \´tcp flags syn / fin,syn,rst,ack tcp
  dport 80 drop\´ (handle 3); iptables: \´-A INPUT -p tcp --syn --dport 80 -j DROP\´ dropped 400 packets
  in 5s (80.0/s): its counter moved´, the rate limit in front of it, the monitor's ´NETFILTER_DROP´ rows
  (´… by nft_do_chain on eth0 (port 80: 400)´), conntrack's share; without a moved rule, the drop rules
  that have no counter (one of them, or a policy, dropped the packets).
- Fix: how to list the chain with handles and counters (´nft -a list chain …´, in the namespace); for a
  rate limit, raise it above the service's peak rate of new connections (´TcpPassiveOpens´ plus the drops
  in the window) or limit per source address (nft meters, iptables ´hashlimit´); otherwise remove or narrow
  the rule (´nft delete rule … handle N´; ´iptables -D …´ for iptables-nft's); without a moved rule, add
  ´counter´ to the drop rules and policies to see which one drops.

Tested by TestLight/RunFirewallRateLimit: an iptables rule that accepts 20 new connections a second to a
server that closes its connections, and drops the rest.`,
})

var _ = define(Class{ID: PacketDrops,
	Critical: true,
	Errors:   true, Delays: true, Latency: true, Drops: true, Fails: FailsConnections,
	Meaning:    "the kernel drops packets for a reason no other finding names, at the place its drop reason tells (a qdisc, a route, a neighbour, a tc or XDP program)",
	Active:     "the drop monitor counted ≥ 20 drops and ≥ 1/s of one such reason (warning; critical at ≥ 100/s, or ≥ 10/s of a run's packets in another namespace)",
	LatentWhen: "none",
	Seed:       "—",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´drops´ (´drops.go´). **The drop monitor** (´internal/dropmon´): BPF programs on the tracepoints
´skb:kfree_skb´ and ´tcp:tcp_retransmit_skb´ (tp_btf; CO-RE, compiled ahead and committed, rebuilt by
´go generate ./internal/dropmon´ with clang and libbpf's headers) count, host-wide, every packet the
kernel frees as dropped, by network namespace (the inode the kernel names namespaces by), drop reason
(´SKB_DROP_REASON_*´, named from the running kernel's BTF ´enum skb_drop_reason´, since the numbers
differ between kernels), the kernel function that freed it (from ´/proc/kallsyms´), protocol, interface,
and port — the local socket's when the kernel knows it, else the packet's destination port. The counts
stay in kernel maps: exact per (namespace, reason, function, protocol, interface) in a table of 2048 keys
(a key that finds it full is counted as overflowed: ´drops.overflow´), and per port in an LRU table of
4096 (ports are many where they are ephemeral; the least recently hit make room). Retransmissions are
counted per flow with their sizes (segments, bytes, full-size ones: at least the flow's MSS). Every
snapshot reads the namespace's part (´drops´ in the bundle: at most 64 rows, and 64 rows of the host's
other namespaces, named by ´ip netns´ name or inode), and the tcp_info of the 8 flows that retransmitted
most (path MTU, segment size). run and the agent start it once, check and collect for their window; it
is detached when the command ends, whichever way (the links are file descriptors, never pinned).

**Without BPF** (not root, a kernel lockdown, no BTF, a kernel older than 5.17 or without the
tracepoints) the snapshots' ´drops´ say why (´unavailable´), the collector's status is ´unavailable´
with that reason, and every rule runs on the kernel's counters as before: ´firewall-drop´ on the rules'
counters, ´socket-buffer-limit´ on sock_diag's per-socket drops, ´packet-loss´ without the places;
´packet-drops´ and ´path-mtu-blackhole´ need the monitor.

**What each reason becomes.** ´TCP_LISTEN_OVERFLOW´ is ´accept-queue-overflow´'s evidence (the monitor
sees only the handshakes' final ACKs a full queue drops: the SYNs it refuses are consumed without a
reason, so ´TcpExtListenOverflows´ stays the count); ´SOCKET_RCVBUFF´, ´SOCKET_BACKLOG´, ´PROTO_MEM´,
´TCP_OFOMERGE´, ´TCP_OFO_QUEUE_PRUNE´ are ´socket-buffer-limit´'s; ´CPU_BACKLOG´ is ´nic-drops´'s
(´net.core.netdev_max_backlog´); ´QDISC_DROP´ on an interface ´bandwidth-saturated´ names is its; ´PKT_TOO_BIG´
is ´path-mtu-blackhole´'s; ´NETFILTER_DROP´ is ´firewall-drop´'s (or conntrack's full table). The drops every
host has — ´NO_SOCKET´ (a segment for a socket just closed), ´NOT_SPECIFIED´, ´QUEUE_PURGE´ and
´SOCKET_CLOSE´ (a closing socket's unread queue), ´TCP_OLD_DATA´, ´TCP_CLOSE´, ´OTHERHOST´, checksum and
sequence checks… (´stray´ in ´drops.go´) — are never blamed. **Every other reason** with at least 20 drops
and one a second in the window is a ´packet-drops´ finding, subject the reason, **warning**, **critical**
at 100 a second: its rows (´QDISC_DROP: 300 tcp packets dropped in 1s (300.0/s) by __dev_queue_xmit on
eth0 (socket port 80: 300)´), for a qdisc its kind and limits, and the fix names the place and the knob:
the qdisc's limit (´tc -s qdisc show dev eth0´), the neighbour's queue (´unres_qlen_bytes´), the route (´ip
route get´), ´rp_filter´, an XDP or tc program, the device's ring (´ethtool -G´), and how to see each
drop's kernel stack (´perf record -e skb:kfree_skb -a -g´).
**Drops elsewhere on the host, by flow.** A drop in **another namespace of the host** is this service's
only when the drop monitor's ledger ties it to one of its connections (´ownFlows´: a flow of the
namespace's ledger or of its retransmitting connections, and in a run those of the other side; the same
before or after NAT, conntrack's original tuple): a router between the client and the server, a bridge.
Such drops, of one reason in one namespace, with at least 20 packets and one a second, are a
´packet-drops´ finding of their own, subject ´netns NAME REASON´, ´about.drop_reason´ the reason, named
once (on the server's side of a run when it is observed; in ´check´ too), **critical** at 10 a second,
with up to three of the rows and their flows (´QDISC_DROP: 200 tcp packets of 10.0.0.2:80 →
10.0.1.1:41000 dropped in 1s by __dev_queue_xmit on r-s in network namespace router´). Another
namespace's drops of other flows — a neighbour being torn down, on the same port number — stay
**elsewhere on this host**: in the bundle's ´ledger_elsewhere´, never a finding about this service.
Frames a device dropped at layer 2 as larger than its MTU are ´mtu-mismatch´'s. Tested by
TestDropsElsewhere and TestRunNeighbourSamePort (a healthy service beside another on the same port losing
its route, a Go server and nginx).`,
})

var _ = register(Rule{Name: "drops", Order: 140, Scope: PerSide, IDs: []report.FindingID{FirewallDrop, PacketDrops}, Checks: "firewall rules and the kernel's drop reasons", Check: checkDrops,
	Looks: func(s *evidence.Snapshot) bool {
		return s.Firewall != nil || s.Drops != nil && s.Drops.Unavailable == ""
	}})

// dropSource is the Source of the items that rest on the drop monitor.
const dropSource = "drop monitor"

// A drop that rose in the window: the monitor's row with Packets, Bytes
// and each port's count as the rise since the window's first snapshot.
type drop = evidence.Drop

// dropsIn returns the drops the monitor counted in the namespace during
// the window, busiest first, and those elsewhere on the host; ok is
// false when the monitor did not count in both snapshots (then the rules
// run on the kernel's counters alone).
func dropsIn(w evidence.Window) (here, elsewhere []drop, ok bool) {
	a, b := w.First.Drops, w.Last.Drops
	if a == nil || b == nil || a.Unavailable != "" || b.Unavailable != "" || !a.Since.Equal(b.Since) {
		return nil, nil, false
	}
	return rose(a.Counts, b.Counts), rose(a.Elsewhere, b.Elsewhere), true
}

// rose is what each row of last rose by since first.
func rose(first, last []drop) []drop {
	before := make(map[evidence.DropKey]drop, len(first))
	for _, d := range first {
		before[d.Key()] = d
	}
	var out []drop
	for _, d := range last {
		f := before[d.Key()]
		if d.Packets <= f.Packets {
			continue
		}
		n := d
		n.Packets, n.Bytes = d.Packets-f.Packets, d.Bytes-min(f.Bytes, d.Bytes)
		n.Ports = nil
		for _, p := range d.Ports {
			was := uint64(0)
			for _, q := range f.Ports {
				if q.Port == p.Port && q.Socket == p.Socket && q.Source == p.Source {
					was = q.Packets
				}
			}
			if p.Packets > was {
				p.Packets -= was
				n.Ports = append(n.Ports, p)
			}
		}
		out = append(out, n)
	}
	slices.SortStableFunc(out, func(a, b drop) int { return cmp.Compare(b.Packets, a.Packets) })
	return out
}

// withReason keeps the drops of the reasons given.
func withReason(ds []drop, reasons ...string) []drop {
	var out []drop
	for _, d := range ds {
		if slices.Contains(reasons, d.Reason) {
			out = append(out, d)
		}
	}
	return out
}

func total(ds []drop) uint64 {
	var n uint64
	for _, d := range ds {
		n += d.Packets
	}
	return n
}

// dropText says where a drop happened: "NETFILTER_DROP: 350 tcp packets
// dropped in nft_do_chain on veth0, to port 80 (345)".
func dropText(d drop, w evidence.Window) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d", d.Reason, d.Packets)
	if d.Proto != "" {
		b.WriteString(" " + d.Proto)
	}
	fmt.Fprintf(&b, " packets dropped in %s (%.1f/s)", round(w), float64(d.Packets)/max(w.Duration().Seconds(), 0.001))
	if d.NetNS != 0 {
		b.WriteString(" in network namespace " + nsLabel(d))
	}
	if d.Location != "" {
		b.WriteString(" by " + d.Location)
	}
	if d.Iface != "" {
		b.WriteString(" on " + d.Iface)
	}
	if len(d.Ports) > 0 {
		var ps []string
		for _, p := range d.Ports {
			what := "port "
			switch {
			case p.Socket:
				what = "socket port "
			case p.Source:
				what = "from port "
			}
			ps = append(ps, fmt.Sprintf("%s%d: %d", what, p.Port, p.Packets))
		}
		b.WriteString(" (" + strings.Join(ps, ", ") + ")")
	}
	return b.String()
}

// nsLabel names a drop's namespace: its `ip netns` name, or its inode as
// the kernel prints it.
func nsLabel(d drop) string {
	if d.NetNSName != "" {
		return d.NetNSName
	}
	return strconv.FormatUint(d.NetNS, 10)
}

// dropItems are the drop monitor's evidence for the reasons given, for a
// finding that owns them (TCP_LISTEN_OVERFLOW for an accept queue): at
// most three, the busiest.
func dropItems(in *Input, reasons ...string) []report.Item {
	return dropItemsOn(in, "", reasons...)
}

// dropItemsOn is dropItems for one interface's drops ("": any).
func dropItemsOn(in *Input, iface string, reasons ...string) []report.Item {
	w, ok := in.Bundle.Window()
	if !ok {
		return nil
	}
	here, _, ok := dropsIn(w)
	if !ok {
		return nil
	}
	var out []report.Item
	for _, d := range withReason(here, reasons...) {
		if len(out) == 3 {
			break
		}
		if iface == "" || d.Iface == iface {
			out = append(out, report.Item{Text: dropText(d, w), Source: dropSource, Window: true})
		}
	}
	return out
}

// Drop reasons by what they mean. Those not listed are named but not
// blamed on their own.
var (
	// stray are the drops every host has: segments for sockets just
	// closed, queues purged at close, packets for other hosts, checksum
	// and state checks. They are never a finding.
	stray = map[string]bool{
		"NOT_SPECIFIED": true, "NO_SOCKET": true, "SOCKET_CLOSE": true, "QUEUE_PURGE": true, "TCP_CLOSE": true,
		"TCP_OLD_DATA": true, "TCP_OLD_ACK": true, "TCP_ABORT_ON_DATA": true, "TCP_INVALID_SEQUENCE": true, "TCP_RESET": true,
		"TCP_FLAGS": true, "TCP_ZEROWINDOW": true, "TCP_TOO_OLD_ACK": true, "TCP_ACK_UNSENT_DATA": true, "TCP_INVALID_ACK_SEQUENCE": true,
		"TCP_RFC7323_PAWS": true, "TCP_RFC7323_PAWS_ACK": true, "TCP_RFC7323_TSECR": true, "TCP_OFO_DROP": true, "TCP_INVALID_SYN": true,
		"TCP_SYNCOOKIES_FAILED": true, "OTHERHOST": true, "PKT_TOO_SMALL": true, "IP_CSUM": true, "UDP_CSUM": true, "TCP_CSUM": true,
		"IP_INHDR": true, "IP_NOPROTO": true, "UNHANDLED_PROTO": true, "IPV6_NDISC_FRAG": true, "IPV6_NDISC_HOP_LIMIT": true,
		"IPV6_NDISC_BAD_CODE": true, "IPV6_NDISC_BAD_OPTIONS": true, "IPV6_NDISC_NS_OTHERHOST": true, "DUP_FRAG": true,
		"FRAG_REASM_TIMEOUT": true, "FRAG_TOO_FAR": true, "TCP_MD5NOTFOUND": true, "TCP_MD5UNEXPECTED": true, "TCP_MD5FAILURE": true,
		"SOCKET_FILTER": true, "MAC_IEEE_MAC_CONTROL": true, "SKB_UCOPY_FAULT": true, "IP_LOCAL_SOURCE": true, "IP_INVALID_SOURCE": true,
		"IP_INVALID_DEST": true, "INVALID_PROTO": true, "TCP_OVERWINDOW": true, "TCP_RFC7323_TW_PAWS": true, "TCP_OLD_SEQUENCE": true,
		"TCP_INVALID_END_SEQUENCE": true, "UNIX_DISCONNECT": true, "UNIX_SKIP_OOB": true, "IP_LOCALNET": true, "HDR_TRUNC": true,
		"SKB_CSUM": true, "ICMP_CSUM": true, "TCP_FASTOPEN": true, "LOCAL_MAC": true, "MAC_INVALID_SOURCE": true, "PACKET_SOCK_ERROR": true,
		"IP_INADDRERRORS": true, "IPV6_BAD_EXTHDR": true, "TCP_AUTH_HDR": true, "TCP_AONOTFOUND": true, "TCP_AOUNEXPECTED": true,
		"TCP_AOKEYNOTFOUND": true, "TCP_AOFAILURE": true, "SKB_CONSUMED": true, "SKB_NOT_DROPPED_YET": true, "PFMEMALLOC": true,
	}
	// places say, for the other reasons, where the packets died and
	// what to look at or change.
	places = map[string]string{
		"QDISC_DROP":               "the interface's queueing discipline dropped them: its queue was full (`tc -s qdisc show dev IFACE`: raise its limit, or give the link more rate)",
		"QDISC_CONGESTED":          "the interface's queueing discipline signalled congestion (`tc -s qdisc show dev IFACE`)",
		"QDISC_OVERLIMIT":          "the interface's queueing discipline dropped them over its limit (`tc -s qdisc show dev IFACE`: raise its limit)",
		"FQ_FLOW_LIMIT":            "fq's per-flow queue was full (`tc -s qdisc show dev IFACE`: flow_limit)",
		"FQ_BAND_LIMIT":            "fq's band was full (`tc -s qdisc show dev IFACE`)",
		"FQ_HORIZON_LIMIT":         "fq dropped packets timestamped beyond its horizon (`tc -s qdisc show dev IFACE`: horizon)",
		"CAKE_FLOOD":               "cake's flood protection dropped them (`tc -s qdisc show dev IFACE`)",
		"BPF_CGROUP_EGRESS":        "a cgroup BPF program dropped them on egress (`bpftool cgroup tree`)",
		"SECURITY_HOOK":            "a security module dropped them (SELinux, AppArmor, a BPF LSM)",
		"XFRM_POLICY":              "an IPsec (xfrm) policy dropped them (`ip xfrm policy`)",
		"NEIGH_HH_FILLFAIL":        "the link header could not be filled for the next hop",
		"RECURSION_LIMIT":          "the device recursion limit (a tunnel or bond loop) was hit",
		"TAP_FILTER":               "the tun/tap device's filter dropped them",
		"TAP_TXFILTER":             "the tun/tap device's transmit filter dropped them",
		"TC_EGRESS":                "a tc filter on the interface's egress dropped them (`tc -s filter show dev IFACE egress`)",
		"TC_INGRESS":               "a tc filter on the interface's ingress dropped them (`tc -s filter show dev IFACE ingress`)",
		"TC_CHAIN_NOTFOUND":        "a tc filter jumped to a chain that does not exist (`tc -s filter show dev IFACE`)",
		"TC_RECLASSIFY_LOOP":       "tc filters reclassified in a loop (`tc -s filter show dev IFACE`)",
		"XDP":                      "an XDP program on the interface dropped them (`ip link show dev IFACE`: the xdp program attached)",
		"NEIGH_FAILED":             "the next hop did not answer ARP/NDP (`ip neigh show dev IFACE`: FAILED entries; check the address and the link)",
		"NEIGH_QUEUEFULL":          "packets waiting for the next hop's ARP/NDP answer overflowed its queue (net.ipv4.neigh.IFACE.unres_qlen_bytes)",
		"NEIGH_CREATEFAIL":         "no neighbour entry could be made: the neighbour table is full (net.ipv4.neigh.default.gc_thresh3)",
		"NEIGH_DEAD":               "the neighbour entry was being removed",
		"IP_OUTNOROUTES":           "no route to the destination (`ip route get ADDRESS`)",
		"IP_INNOROUTES":            "no route for the packet received (`ip route get ADDRESS from SOURCE iif IFACE`)",
		"IP_RPFILTER":              "the reverse-path filter: the source is not routed back through the interface it came in on (net.ipv4.conf.IFACE.rp_filter: 2, loose, or 0 on asymmetric paths)",
		"FULL_RING":                "the device's ring was full (`ethtool -g IFACE`, `ethtool -G IFACE rx N`)",
		"DEV_READY":                "the device was down or not ready (`ip link show dev IFACE`)",
		"NOMEM":                    "the kernel could not allocate memory for them",
		"DEV_HDR":                  "the device could not build the link header",
		"NETFILTER_DROP":           "a netfilter hook dropped them",
		"IPV6DISABLED":             "IPv6 is disabled on the interface (net.ipv6.conf.IFACE.disable_ipv6)",
		"BRIDGE_INGRESS_STP_STATE": "the bridge port is not forwarding (STP state)",
		"VXLAN_INVALID_HDR":        "a VXLAN packet with a bad header",
		"IP_TUNNEL_ECN":            "an ECN mismatch when decapsulating a tunnel",
		"SKB_GSO_SEG":              "segmenting a GSO packet failed",
		"UNICAST_IN_L2_MULTICAST":  "a unicast packet in a link-layer multicast frame",
	}
)

// minDrops is how many drops of one reason in the window make a finding:
// fewer are noise, as are fewer than one a second.
const minDrops = 20

// blamed reports whether drops of this count over the window are worth a
// finding.
func blamed(n uint64, w evidence.Window) bool {
	return n >= minDrops && float64(n) >= w.Duration().Seconds()
}

// checkDrops makes the findings of the drop monitor and the firewall's
// counters: the firewall rules that dropped a service's packets, and the
// drops of the reasons no other rule names, each with its place.
func checkDrops(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	here, _, haveMonitor := dropsIn(w)
	var out []report.Finding
	if f, ok := firewallFinding(in, w, here, haveMonitor); ok {
		out = append(out, f)
	}
	// The other reasons, where they are not another rule's evidence.
	byReason := map[string][]drop{}
	var reasons []string
	for _, d := range here {
		if stray[d.Reason] || named(in, d) {
			continue
		}
		if byReason[d.Reason] == nil {
			reasons = append(reasons, d.Reason)
		}
		byReason[d.Reason] = append(byReason[d.Reason], d)
	}
	for _, r := range reasons {
		ds := byReason[r]
		n := total(ds)
		if !blamed(n, w) {
			continue
		}
		out = append(out, packetDrops(b, w, r, ds, n))
	}
	// The service's own packets dying in another namespace of the host
	// (a router between the client and the server), by flow: once, from
	// the server's side of a run when it is observed.
	if namesElsewhere(in) {
		out = append(out, elsewhereFindings(in, w)...)
	}
	return out
}

// packetDrops is the finding for one reason's drops in the namespace.
func packetDrops(b *evidence.Bundle, w evidence.Window, reason string, ds []drop, n uint64) report.Finding {
	where := ds[0].Iface
	f := report.Finding{ID: PacketDrops, Severity: report.Warning, Status: report.Active, Subject: reason, About: report.About{DropReason: reason, Interface: where},
		Title: fmt.Sprintf("The kernel dropped %d packets (%s)", n, reason)}
	if where != "" {
		f.Title += " on " + where
	}
	for i, d := range ds {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, report.Item{Text: dropText(d, w), Source: dropSource, Window: true})
	}
	if reason == "QDISC_DROP" {
		f.Evidence = append(f.Evidence, qdiscItems(w.Last, where)...)
	}
	if float64(n)/max(w.Duration().Seconds(), 0.001) >= 100 {
		f.Severity = report.Critical
	}
	place, ok := places[reason]
	if !ok {
		place = "the kernel's drop reason " + reason + " (include/net/dropreason-core.h names where it is raised)"
	}
	place = strings.ReplaceAll(place, "IFACE", cmp.Or(where, "IFACE"))
	prefix := netns.Parse(b.Host.NetNS).ExecPrefix()
	f.Actions = []report.Action{report.Advise(place),
		report.Command(prefix+"perf record -e skb:kfree_skb -a -g sleep 5", "then `perf script`: each drop's kernel stack, to confirm where")}
	return f
}

// qdiscItems describe an interface's qdiscs: kind, handle and limits.
func qdiscItems(s *evidence.Snapshot, iface string) []report.Item {
	var out []report.Item
	for _, i := range s.Interfaces {
		if i.Name != iface {
			continue
		}
		for _, q := range i.Qdiscs {
			if q.Class {
				continue
			}
			t := fmt.Sprintf("qdisc %s %s (parent %s) on %s", q.Kind, q.Handle, q.Parent, iface)
			if q.RateBytesPerSec > 0 {
				t += fmt.Sprintf(": rate %s", bitrate(float64(q.RateBytesPerSec)))
			}
			if q.LimitBytes > 0 {
				t += fmt.Sprintf(", limit %d bytes", q.LimitBytes)
			}
			t += fmt.Sprintf("; %d dropped since it was set up", q.Drops)
			out = append(out, report.Item{Text: t, Source: "qdisc"})
		}
	}
	return out
}

// named reports whether another finding names a drop of this namespace
// as its own evidence: one whose class owns its reason (DropReasons:
// the accept queue's, the socket buffers', the MTU's, the firewall's),
// or owns it on the interface it names and names this one (a saturated
// link's qdisc).
func named(in *Input, d drop) bool {
	for _, c := range Classes() {
		if !slices.Contains(c.DropReasons, d.Reason) {
			continue
		}
		if !c.OnItsLink || namesLink(in, c.ID, d.Iface) {
			return true
		}
	}
	return false
}

// namesLink reports whether the rule that makes id finds it active in
// this input about an interface.
func namesLink(in *Input, id report.FindingID, iface string) bool {
	for _, r := range Registry {
		if !slices.Contains(r.IDs, id) || r.Scope != PerSide && r.Scope != PerHost {
			continue
		}
		for _, f := range r.Check(in) {
			if f.ID == id && f.Status == report.Active && f.About.Interface == iface {
				return true
			}
		}
	}
	return false
}

// elsewhereFindings are the drops of the service's own flows (ownFlows:
// its clients', its listener's, its dependencies', before or after NAT)
// in the host's other namespaces: where its packets died on the way.
// Another namespace's drops of other flows, on whatever port, are that
// namespace's service's, never this one's.
func elsewhereFindings(in *Input, w evidence.Window) []report.Finding {
	_, elsewhere, ok := ledgerIn(w)
	if !ok {
		return nil
	}
	links := linksOf(w.Last)
	type group struct {
		rows []flowDrop
		n    uint64
	}
	groups := map[string]*group{}
	var order []string
	for _, d := range ownElsewhere(in, elsewhere) {
		if stray[d.Reason] || namedElsewhere(d.Reason) {
			continue
		}
		if _, _, big := oversize(d, links); big {
			continue // a device's MTU: the MTU's finding names it
		}
		key := flowNS(d) + " " + d.Reason
		if groups[key] == nil {
			groups[key] = &group{}
			order = append(order, key)
		}
		groups[key].rows = append(groups[key].rows, d)
		groups[key].n += d.Packets
	}
	var out []report.Finding
	for _, key := range order {
		g := groups[key]
		if !blamed(g.n, w) {
			continue
		}
		d := g.rows[0]
		f := report.Finding{ID: PacketDrops, Severity: report.Warning, Status: report.Active, Subject: "netns " + flowNS(d) + " " + d.Reason,
			About: report.About{DropReason: d.Reason, Interface: d.Iface},
			Title: fmt.Sprintf("This service's packets die in network namespace %s: %d dropped (%s)", flowNS(d), g.n, d.Reason)}
		for i, r := range g.rows {
			if i == 3 {
				break
			}
			f.Evidence = append(f.Evidence, report.Item{Text: flowText(r, w), Source: dropSource, Window: true})
		}
		if len(g.rows) > 3 {
			f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%d of this service's connections in all, each matched by its flow (the drop monitor's ledger, followed through NAT), not by its port number", len(g.rows)), Source: dropSource, Window: true})
		}
		place := cmp.Or(places[d.Reason], "the kernel's drop reason "+d.Reason)
		f.Actions = notes(strings.ReplaceAll(place, "IFACE", cmp.Or(d.Iface, "IFACE")) + " — in network namespace " + flowNS(d))
		if float64(g.n)/max(w.Duration().Seconds(), 0.001) >= 10 {
			f.Severity = report.Critical
		}
		out = append(out, f)
	}
	return out
}

// namedElsewhere reports whether another finding names a reason's drops
// in the host's other namespaces (Class.DropsElsewhere: the MTU's).
func namedElsewhere(reason string) bool {
	for _, c := range Classes() {
		if c.DropsElsewhere && slices.Contains(c.DropReasons, reason) {
			return true
		}
	}
	return false
}

// fwMove is a firewall rule whose counter rose in the window.
type fwMove struct {
	evidence.FirewallRule
	rose uint64
}

func fwKey(r evidence.FirewallRule) string {
	return r.Family + " " + r.Table + " " + r.Chain + " " + strconv.FormatUint(r.Handle, 10) + " " + r.Text
}

// firewallMoves are the counted rules that drop or reject and whose
// counters rose, most first.
func firewallMoves(w evidence.Window) []fwMove {
	if w.First.Firewall == nil || w.Last.Firewall == nil {
		return nil
	}
	before := map[string]uint64{}
	for _, r := range w.First.Firewall.Rules {
		before[fwKey(r)] = r.Packets
	}
	var out []fwMove
	for _, r := range w.Last.Firewall.Rules {
		if !r.Counted || r.Verdict != "drop" && r.Verdict != "reject" {
			continue
		}
		was, ok := before[fwKey(r)]
		if !ok || r.Packets <= was {
			continue
		}
		out = append(out, fwMove{r, r.Packets - was})
	}
	slices.SortStableFunc(out, func(a, b fwMove) int { return cmp.Compare(b.rose, a.rose) })
	return out
}

// ruleName is a rule as a user finds it: "inet filter input: tcp dport
// 80 drop", with iptables' form when iptables-nft made it.
func ruleName(r evidence.FirewallRule) string {
	s := fmt.Sprintf("%s %s %s", r.Family, r.Table, r.Chain)
	if r.Hook != "" && r.Hook != strings.ToLower(r.Chain) {
		s += " (hook " + r.Hook + ")"
	}
	s += ": `" + r.Text + "`"
	if r.Handle != 0 {
		s += fmt.Sprintf(" (handle %d)", r.Handle)
	}
	if r.Iptables != "" {
		s += "; iptables: `" + r.Iptables + "`"
	}
	return s
}

// limitBefore is the rate limit that lets through the packets a drop
// rule then drops (iptables' `-m limit ... -j ACCEPT` then `-j DROP`):
// the last rule of the same chain before it with a limit and not over it.
func limitBefore(s *evidence.Snapshot, r evidence.FirewallRule) (evidence.FirewallRule, bool) {
	var found evidence.FirewallRule
	ok := false
	for _, x := range s.Firewall.Rules {
		if x.Family != r.Family || x.Table != r.Table || x.Chain != r.Chain {
			continue
		}
		if x.Handle == r.Handle && x.Text == r.Text {
			break
		}
		if x.Limit != "" && !x.Over && x.Verdict == "accept" {
			found, ok = x, true
		}
	}
	return found, ok
}

// listening reports whether a TCP port has a listener in the snapshot.
func listening(s *evidence.Snapshot, port int) bool {
	if s.Sockets == nil {
		return false
	}
	for _, l := range s.Sockets.Listeners {
		if l.Proto != "unix" && l.Port == port {
			return true
		}
	}
	return false
}

// firewallFinding is firewall-drop: the rules whose counters moved while
// they dropped or rejected, and what the drop monitor saw of netfilter's
// drops. Packets to a port nothing serves are the firewall doing its job
// (a scan, a closed service): outside a run they make no finding unless
// a rule limits a rate.
func firewallFinding(in *Input, w evidence.Window, here []drop, haveMonitor bool) (report.Finding, bool) {
	moves := firewallMoves(w)
	nf := withReason(here, "NETFILTER_DROP")
	n := total(nf)
	// Conntrack's full table drops through netfilter too: those are
	// conntrack-table-full's.
	ct := w.ConntrackStat("drop")
	if ct >= n {
		n = 0
	} else {
		n -= ct
	}
	var moved uint64
	for _, m := range moves {
		moved += m.rose
	}
	if moved == 0 && (!haveMonitor || n == 0) {
		return report.Finding{}, false
	}
	count := max(moved, n)
	if !blamed(count, w) {
		return report.Finding{}, false
	}
	last := w.Last
	relevant := in.Run != nil
	for _, m := range moves {
		if _, ok := limitBefore(last, m.FirewallRule); ok || m.Limit != "" {
			relevant = true
		}
	}
	ports := map[int]bool{}
	for _, d := range nf {
		for _, p := range d.Ports {
			ports[p.Port] = true
			if p.Socket || listening(last, p.Port) {
				relevant = true
			}
		}
	}
	if len(ports) == 0 && float64(count)/max(w.Duration().Seconds(), 0.001) >= 10 {
		relevant = true // the kernel cannot tell whom: too many to be noise
	}
	if !relevant {
		return report.Finding{}, false
	}
	f := report.Finding{ID: FirewallDrop, Severity: report.Warning, Status: report.Active}
	rate := float64(count) / max(w.Duration().Seconds(), 0.001)
	// Critical where it hurts clients it should serve: a run's, or a
	// rate limit's legitimate excess. A ban list dropping one
	// attacker's packets to a listening port is the firewall's job,
	// worth a warning.
	limited := false
	for _, m := range moves {
		if _, ok := limitBefore(last, m.FirewallRule); ok || m.Limit != "" {
			limited = true
		}
	}
	if rate >= 10 && (in.Run != nil || limited) {
		f.Severity = report.Critical
	}
	prefix := netns.Parse(in.Bundle.Host.NetNS).ExecPrefix()
	if len(moves) > 0 {
		top := moves[0]
		f.Subject = fmt.Sprintf("%s %s %s", top.Family, top.Table, top.Chain)
		f.Title = fmt.Sprintf("A firewall rule drops packets: `%s` (%s %s %s) dropped %d in %s", top.Text, top.Family, top.Table, top.Chain, top.rose, round(w))
		for i, m := range moves {
			if i == 3 {
				break
			}
			what := "dropped"
			if m.Verdict == "reject" {
				what = "rejected"
			}
			f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%s %s %d packets in %s (%.1f/s): its counter moved",
				ruleName(m.FirewallRule), what, m.rose, round(w), float64(m.rose)/max(w.Duration().Seconds(), 0.001)), Source: "nftables", Window: true})
			if l, ok := limitBefore(last, m.FirewallRule); ok {
				f.Evidence = append(f.Evidence, report.Item{Text: "the rate limit in front of it, whose excess falls through to it: " + ruleName(l), Source: "nftables"})
			}
		}
		f.Actions = append(f.Actions,
			report.Command(fmt.Sprintf("%snft -a list chain %s %s %s", prefix, top.Family, top.Table, top.Chain), "the rule with its handle and counters"))
		if l, ok := limitBefore(last, top.FirewallRule); ok || top.Limit != "" {
			limit := top.Limit
			if ok {
				limit = l.Limit
			}
			f.Actions = append(f.Actions, report.Advise(fmt.Sprintf("the limit (%s) is below what the service receives: raise it above the peak rate of new connections (TcpPassiveOpens + what it dropped: %.0f/s in this window), or limit per source address (nft meters, iptables hashlimit) so one client's burst does not drop everyone's", limit, passiveRate(w)+rate)))
		} else {
			f.Actions = append(f.Actions, report.Advise(fmt.Sprintf("if the service should receive these packets, remove or narrow the rule: `%snft delete rule %s %s %s handle %d`", prefix, top.Family, top.Table, top.Chain, top.Handle)))
		}
		if top.Iptables != "" {
			f.Actions = append(f.Actions, report.Advise(fmt.Sprintf("iptables-nft made it: `%siptables -S %s` lists it, `iptables -D %s` with the same matches removes it", prefix, top.Chain, strings.TrimPrefix(top.Iptables, "-A "))))
		}
	} else {
		f.Subject = "netfilter"
		f.Title = fmt.Sprintf("The firewall drops packets: %d netfilter drops in %s, and no counted rule moved", n, round(w))
		f.Actions = append(f.Actions, report.Advise(fmt.Sprintf("add `counter` to the drop rules and policies of the hooks the packets pass (`%snft -a list ruleset`) to see which one drops them", prefix)))
	}
	for i, d := range nf {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, report.Item{Text: dropText(d, w), Source: dropSource, Window: true})
	}
	if ct > 0 {
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("of netfilter's drops, %d were conntrack's, its table full (its own finding)", ct), Source: "conntrack.drop", Window: true})
	}
	if len(moves) == 0 && last.Firewall != nil {
		var cands []string
		for _, r := range last.Firewall.Rules {
			if (r.Verdict == "drop" || r.Verdict == "reject") && !r.Counted {
				cands = append(cands, ruleName(r))
			}
		}
		if len(cands) > 0 {
			f.Evidence = append(f.Evidence, report.Item{Text: "rules that drop without a counter (one of them, or a policy, dropped these): " + strings.Join(cands[:min(len(cands), 5)], "; "), Source: "nftables"})
		}
	}
	return f, true
}

// passiveRate is the connections the namespace accepted a second.
func passiveRate(w evidence.Window) float64 { return w.Rate("Tcp.PassiveOpens") }
