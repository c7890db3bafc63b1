package evidence

import (
	"encoding/json"
	"time"
)

// BundleVersion is the version of the bundle file format written by
// `netdoctor collect`. Readers reject bundles with a newer major version.
// Version 2 names counters as nstat does and a listener's queue and
// backlog accept_queue and backlog; version 1 is still read.
const BundleVersion = 2

// Bundle is a series of snapshots taken from one network namespace. It is
// what `netdoctor collect` writes and `netdoctor diagnose` reads.
type Bundle struct {
	Version   int        `json:"version"`
	Host      Host       `json:"host"`
	Start     time.Time  `json:"start"`
	Snapshots []Snapshot `json:"snapshots"`
	// Incident is set on a bundle the agent wrote when findings turned
	// active: what turned active, and when.
	Incident *Incident `json:"incident,omitempty"`
}

// Incident says why `netdoctor agent` wrote a bundle.
type Incident struct {
	// Time is when the first finding turned active; the bundle holds
	// the window before and after it.
	Time     time.Time         `json:"time"`
	Findings []IncidentFinding `json:"findings"`
	// During names the runs that were watching the host's servers at
	// the time: their load may be what the incident records.
	During string `json:"during,omitempty"`
	// Dependencies are the agent's last dependency trace when the
	// incident was written (a report.Traced: the servers' outbound
	// connections per destination), kept as JSON because report builds
	// on this package. diagnose reads them back with the snapshots.
	Dependencies json.RawMessage `json:"dependencies,omitempty"`
	// Profile is an on-CPU profile of the servers the agent follows,
	// taken for a few seconds from the moment of the incident (a
	// cpuprof.Profile, kept as JSON for the same reason);
	// ProfileError says why there is none.
	Profile      json.RawMessage `json:"profile,omitempty"`
	ProfileError string          `json:"profile_error,omitempty"`
}

// IncidentFinding is one finding that turned active.
type IncidentFinding struct {
	ID       string    `json:"id"`
	Severity string    `json:"severity"`
	Subject  string    `json:"subject,omitempty"`
	Title    string    `json:"title"`
	Time     time.Time `json:"time"`
}

// Host identifies where a bundle was taken.
type Host struct {
	Hostname string `json:"hostname"`
	Kernel   string `json:"kernel"` // uname -r
	CPUs     int    `json:"cpus"`
	// NetNS is the namespace observed: "" for the caller's own, else the
	// name or path given with --netns.
	NetNS      string `json:"netns,omitempty"`
	NetNSInode uint64 `json:"netns_inode,omitempty"`
	// UserHZ is the unit of the CPU tick counters (USER_HZ, 100 on Linux).
	UserHZ int `json:"user_hz"`
	// BootID is the kernel's boot_id: with NetNSInode it tells whether
	// two sources (an agent and this process) observe the same
	// namespace of the same running kernel.
	BootID string `json:"boot_id,omitempty"`
}

// Status is the outcome of one collector in one snapshot.
type Status struct {
	Collector string `json:"collector"`
	// State is "ok", "partial" (some data, some missing), "unavailable"
	// (the kernel interface or permission is missing) or "error".
	State    string        `json:"state"`
	Error    string        `json:"error,omitempty"`
	Duration time.Duration `json:"duration_ns"`
}

// Collector states.
const (
	StateOK          = "ok"
	StatePartial     = "partial"
	StateUnavailable = "unavailable"
	StateError       = "error"
)

// Snapshot is everything the collectors saw at one instant. A nil pointer
// or empty map means the collector did not produce that part; its Status
// entry says why.
type Snapshot struct {
	Time   time.Time `json:"time"`
	Status []Status  `json:"status"`

	// Counters holds every counter of /proc/net/snmp, /proc/net/netstat and
	// /proc/net/snmp6, keyed "Group.Name": "TcpExt.ListenOverflows",
	// "Tcp.RetransSegs", "Ip6.InReceives" (in JSON, as nstat names them:
	// Counters). Gauges such as Tcp.CurrEstab are included as they
	// appear in the files.
	Counters Counters `json:"counters,omitempty"`
	// Sockstat holds /proc/net/sockstat and sockstat6, keyed "TCP.inuse",
	// "TCP.tw", "TCP.mem" (pages), "sockets.used", "TCP6.inuse".
	Sockstat map[string]int64 `json:"sockstat,omitempty"`
	// Sysctls holds selected sysctls by dotted name, values as the kernel
	// prints them with runs of white space folded to one space.
	Sysctls map[string]string `json:"sysctls,omitempty"`

	Softnet    []Softnet   `json:"softnet,omitempty"`
	CPU        []CPU       `json:"cpu,omitempty"`
	Interfaces []Interface `json:"interfaces,omitempty"`
	Conntrack  *Conntrack  `json:"conntrack,omitempty"`
	Sockets    *Sockets    `json:"sockets,omitempty"`
	Processes  []Process   `json:"processes,omitempty"`
	Kmsg       []KernelMsg `json:"kmsg,omitempty"`
	Resolver   *Resolver   `json:"resolver,omitempty"`
	// Drops is what the kernel's drop monitor counted for the namespace:
	// every packet freed as dropped, by reason and place, and every TCP
	// retransmission by flow. Nil when no monitor was asked for.
	Drops *Drops `json:"drops,omitempty"`
	// Firewall is the namespace's nftables rules (iptables-nft's among
	// them) that drop, reject or rate-limit, with their counters.
	Firewall *Firewall `json:"firewall,omitempty"`
	// Senders is what held the TCP connections' senders (tcp_info, per
	// listening port and per peer), cumulative from Senders.Since.
	Senders *Senders `json:"senders,omitempty"`
}

// Drops is the drop monitor's count for one namespace, cumulative since
// Since: a rule takes the difference between two snapshots, key by key
// (a key absent from the first counts from 0).
type Drops struct {
	// Since is when the monitor started counting.
	Since time.Time `json:"since"`
	// Unavailable says why there are no counts (not root, lockdown, no
	// BTF, a kernel without the tracepoints): the rules then run on the
	// kernel's counters alone.
	Unavailable string `json:"unavailable,omitempty"`
	// Counts are the namespace's drops, one per (reason, place, protocol,
	// port, interface), the busiest MaxDrops.
	Counts []Drop `json:"counts,omitempty"`
	// Elsewhere are drops in the host's other namespaces (a router
	// between the two ends of a run, a container's), the busiest
	// MaxDrops, with the namespace named.
	Elsewhere []Drop `json:"elsewhere,omitempty"`
	// Retrans are the namespace's TCP retransmissions per flow, the
	// busiest MaxRetransFlows.
	Retrans []Retrans `json:"retrans,omitempty"`
	// Seen counts every drop the monitor saw on the host; Overflow those
	// it could not attribute because its table was full (their reason
	// and place are lost, not their number). RetransOverflow likewise.
	Seen            uint64 `json:"seen"`
	Overflow        uint64 `json:"overflow,omitempty"`
	RetransOverflow uint64 `json:"retrans_overflow,omitempty"`

	// Ledger is the namespace's drops by flow: each (reason, place,
	// device, flow), the flow followed through NAT to the one its client
	// opened (FlowDrop.Orig), the busiest MaxLedger. Counts has the same
	// drops, exactly, by place alone.
	Ledger []FlowDrop `json:"ledger,omitempty"`
	// LedgerElsewhere are the drops by flow of the host's other
	// namespaces: first those of this namespace's flows (a flow of
	// Ledger or Retrans, the same before or after NAT: FlowKey), then the
	// busiest, at most MaxLedgerElsewhere.
	LedgerElsewhere []FlowDrop `json:"ledger_elsewhere,omitempty"`
	// RetransElsewhere are the retransmitting connections of the host's
	// other namespaces, chosen as LedgerElsewhere's drops are, at most
	// MaxRetransElsewhere: a server's drops here, its clients'
	// retransmissions there.
	RetransElsewhere []Retrans `json:"retrans_elsewhere,omitempty"`
	// Links describe the devices of LedgerElsewhere's drops (this
	// namespace's own are Snapshot.Interfaces): a drop read against its
	// veth's peer, its bridge's ports.
	Links []Link `json:"links,omitempty"`
	// LedgerTable and RetransTable are the bookkeeping of the monitor's
	// per-flow tables, host-wide.
	LedgerTable  *FlowTable `json:"ledger_table,omitempty"`
	RetransTable *FlowTable `json:"retrans_table,omitempty"`
	// Join says how far the flows were followed through the conntrack
	// tables of the host's namespaces (for the drops whose packets
	// carried no conntrack entry, and the retransmissions).
	Join *FlowJoin `json:"join,omitempty"`
}

// MaxDrops bounds Drops.Counts and Drops.Elsewhere; MaxRetransFlows
// bounds Drops.Retrans; MaxLedger, MaxLedgerElsewhere and
// MaxRetransElsewhere the ledger's lists.
const (
	MaxDrops            = 64
	MaxRetransFlows     = 64
	MaxLedger           = 128
	MaxLedgerElsewhere  = 64
	MaxRetransElsewhere = 32
)

// FlowTable is one of the drop monitor's per-flow tables: LRU tables,
// which make room for a new flow by evicting the one hit least recently,
// so that a flood of new flows (thousands of connections to nowhere)
// never leaves them full and blind. Every counter is cumulative since
// Drops.Since.
type FlowTable struct {
	// Size is how many flows the table holds; Rows how many it held.
	Size int `json:"size"`
	Rows int `json:"rows"`
	// Inserted counts the flows it took in, Evicted those it forgot to
	// make room (their counts are gone from the per-flow lists; the
	// exact totals by place are in Drops.Counts).
	Inserted uint64 `json:"inserted"`
	Evicted  uint64 `json:"evicted"`
	// Refused counts the packets it could not count by flow at all (no
	// free entry at that instant, under contention).
	Refused uint64 `json:"refused,omitempty"`
}

// FlowJoin is how far one search of the host's conntrack tables went.
type FlowJoin struct {
	// Namespaces were searched: those the host's root created whose
	// table had entries. A namespace an unprivileged user made is never
	// searched: its table is that user's to write.
	Namespaces int `json:"namespaces"`
	// Lookups were made in this snapshot; Pending flows are left for the
	// next one (a search is bounded).
	Lookups int `json:"lookups"`
	Pending int `json:"pending,omitempty"`
	// Error says what could not be read.
	Error string `json:"error,omitempty"`
}

// Flow is a transport flow: its protocol ("tcp", "udp", "sctp") and its
// two ends as "10.0.0.1:43210" or "[fe80::1]:80".
type Flow struct {
	Proto string `json:"proto"`
	Src   string `json:"src"`
	Dst   string `json:"dst"`
}

// Reverse is the flow the other way.
func (f Flow) Reverse() Flow { return Flow{Proto: f.Proto, Src: f.Dst, Dst: f.Src} }

// FlowKey identifies a flow whichever way its packets go: its two ends
// in a fixed order.
type FlowKey struct {
	Proto, A, B string
}

// Key is f's FlowKey.
func (f Flow) Key() FlowKey {
	if f.Src > f.Dst {
		return FlowKey{f.Proto, f.Dst, f.Src}
	}
	return FlowKey{f.Proto, f.Src, f.Dst}
}

// FlowDrop counts the packets of one flow one reason dropped at one
// place.
type FlowDrop struct {
	// Reason, Location and Iface are as Drop's.
	Reason   string `json:"reason"`
	Location string `json:"location,omitempty"`
	Iface    string `json:"iface,omitempty"`
	Ifindex  int    `json:"ifindex,omitempty"`
	// NetNS and NetNSName name the namespace of a drop elsewhere.
	NetNS     uint64 `json:"netns,omitempty"`
	NetNSName string `json:"netns_name,omitempty"`
	// Flow is the packet's flow as it was when dropped, after any NAT
	// on its way there: its source and destination. FromSocket says it
	// is its socket's instead (the local end as Src), the packet's
	// headers not being readable there.
	Flow       Flow `json:"flow"`
	FromSocket bool `json:"from_socket,omitempty"`
	// SocketPort is the port of the local socket that owned the packet
	// or was to receive it (a listener's, for its overflow), 0 for none.
	SocketPort int `json:"socket_port,omitempty"`
	// Orig is the flow as its client opened it: conntrack's original
	// tuple, before any NAT. Reply says the packet went its reply way
	// (from Orig's destination to its source). Via says where it was
	// read: "skb", the packet's own conntrack entry at the moment of the
	// drop; or "conntrack", the table of namespace ViaNetNS, searched
	// afterwards for the packet's flow (a packet that crossed into
	// another namespace leaves its entry behind). Nil when no table
	// holds the flow: Flow is then the flow as both ends see it.
	Orig         *Flow  `json:"orig,omitempty"`
	Reply        bool   `json:"reply,omitempty"`
	Via          string `json:"via,omitempty"`
	ViaNetNS     uint64 `json:"via_netns,omitempty"`
	ViaNetNSName string `json:"via_netns_name,omitempty"`
	// Packets and Bytes count what the ledger kept (an evicted flow
	// starts again from 0 when it drops again); MaxLen is the largest
	// packet dropped.
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	MaxLen  uint32 `json:"max_len,omitempty"`
}

// Where FlowDrop.Orig and Retrans.Orig were read.
const (
	ViaSkb       = "skb"
	ViaConntrack = "conntrack"
)

// Client is the flow as its client opened it: Orig when a conntrack
// table had it, else the packet's flow.
func (d FlowDrop) Client() Flow {
	if d.Orig != nil {
		return *d.Orig
	}
	return d.Flow
}

// Key identifies a FlowDrop across snapshots.
func (d FlowDrop) Key() FlowDropKey {
	return FlowDropKey{Reason: d.Reason, Location: d.Location, Iface: d.Iface, NetNS: d.NetNS, Flow: d.Flow, FromSocket: d.FromSocket,
		SocketPort: d.SocketPort}
}

// FlowDropKey identifies a FlowDrop across snapshots.
type FlowDropKey struct {
	Reason, Location, Iface string
	NetNS                   uint64
	Flow                    Flow
	FromSocket              bool
	SocketPort              int
}

// Drop counts the packets one reason dropped at one place.
type Drop struct {
	// Reason is the kernel's SKB_DROP_REASON_* without its prefix
	// ("NETFILTER_DROP", "SOCKET_RCVBUFF"), named from the running
	// kernel's BTF; "reason N" when the kernel names none.
	Reason string `json:"reason"`
	// Location is the kernel function that freed the packet
	// ("nft_do_chain", "__dev_queue_xmit"), from /proc/kallsyms.
	Location string `json:"location,omitempty"`
	// Proto is "tcp", "udp", "icmp", "icmpv6", "sctp", another IP
	// protocol's number, the link protocol when not IP ("ipv4" for an
	// unread IP header, "arp", "0x88cc"), or "" for no protocol at all
	// (a unix socket's buffers).
	Proto string `json:"proto,omitempty"`
	// Iface is the device the packet was on: arriving, or leaving.
	Iface string `json:"iface,omitempty"`
	// NetNS and NetNSName name the namespace of a drop elsewhere.
	NetNS     uint64 `json:"netns,omitempty"`
	NetNSName string `json:"netns_name,omitempty"`
	// Packets and Bytes are exact.
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Ports are the ports some of them went to, the busiest first (at
	// most MaxDropPorts): best effort, as the kernel's table of ports
	// forgets the ones hit least recently.
	Ports []DropPort `json:"ports,omitempty"`
}

// MaxDropPorts bounds Drop.Ports.
const MaxDropPorts = 4

// DropPort is the share of a Drop that went to one port.
type DropPort struct {
	// Port is the local socket's port when Socket, else the packet's
	// service port: its destination port, or its source port (Source)
	// when only that one is below 32768, where ephemeral ports begin (a
	// server's reply, leaving or passing through).
	Port    int    `json:"port"`
	Socket  bool   `json:"socket,omitempty"`
	Source  bool   `json:"source,omitempty"`
	Packets uint64 `json:"packets"`
}

// Key is what identifies a Drop across snapshots.
func (d Drop) Key() DropKey {
	return DropKey{d.Reason, d.Location, d.Proto, d.Iface, d.NetNS}
}

// DropKey identifies a Drop across snapshots.
type DropKey struct {
	Reason, Location, Proto, Iface string
	NetNS                          uint64
}

// Retrans counts one TCP flow's retransmissions.
type Retrans struct {
	Local  string `json:"local"`  // "10.0.0.1:80"
	Remote string `json:"remote"` // "10.0.0.2:41312"
	// NetNS and NetNSName name the namespace of a connection elsewhere
	// (Drops.RetransElsewhere).
	NetNS     uint64 `json:"netns,omitempty"`
	NetNSName string `json:"netns_name,omitempty"`
	// Orig is the flow as its client opened it, when a conntrack table
	// of the host holds the connection (Via "conntrack", in namespace
	// ViaNetNS); Reply says this end is its server, sending Orig's reply
	// way. A retransmitted segment's drop is the FlowDrop whose
	// Client().Key() is this one's.
	Orig         *Flow  `json:"orig,omitempty"`
	Reply        bool   `json:"reply,omitempty"`
	Via          string `json:"via,omitempty"`
	ViaNetNS     uint64 `json:"via_netns,omitempty"`
	ViaNetNSName string `json:"via_netns_name,omitempty"`
	// Segments are the retransmitted skbs, Bytes their payload; Full
	// those of at least MSS bytes (a path that loses only full-size
	// segments drops what is above its MTU).
	Segments uint64 `json:"segments"`
	Bytes    uint64 `json:"bytes"`
	Full     uint64 `json:"full"`
	MaxLen   uint32 `json:"max_len"`
	// MSS is the flow's mss_cache at its last retransmission.
	MSS uint32 `json:"mss"`
	// Open says the connection was still there when sampled, with what
	// tcp_info said of it then: the path MTU TCP believes, the segment
	// size it sends, and the segments it counts lost.
	Open   bool   `json:"open,omitempty"`
	PMTU   uint32 `json:"pmtu,omitempty"`
	SndMSS uint32 `json:"snd_mss,omitempty"`
	Lost   uint32 `json:"lost,omitempty"`
}

// Flow is the connection's flow as this end sends it.
func (r Retrans) Flow() Flow { return Flow{Proto: "tcp", Src: r.Local, Dst: r.Remote} }

// Client is the flow as its client opened it: Orig when a conntrack
// table had it, else the connection's own.
func (r Retrans) Client() Flow {
	if r.Orig != nil {
		return *r.Orig
	}
	return r.Flow()
}

// Firewall is a namespace's nftables rules that can discard a packet.
type Firewall struct {
	// Unavailable says why the rules could not be read.
	Unavailable string         `json:"unavailable,omitempty"`
	Rules       []FirewallRule `json:"rules,omitempty"`
	// Truncated counts rules left out beyond MaxFirewallRules.
	Truncated int `json:"truncated,omitempty"`
}

// MaxFirewallRules bounds Firewall.Rules.
const MaxFirewallRules = 256

// FirewallRule is one nftables rule that drops, rejects or rate-limits,
// or a base chain whose policy drops.
type FirewallRule struct {
	Family string `json:"family"` // "ip", "ip6", "inet", "bridge", "arp", "netdev"
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	// Hook is the base chain's hook ("input", "forward"…), "" for a
	// regular chain jumped to.
	Hook   string `json:"hook,omitempty"`
	Handle uint64 `json:"handle,omitempty"`
	// Text is the rule as nft prints it ("tcp dport 80 ct state new
	// limit rate over 10/second drop"); for a policy, "policy drop".
	Text string `json:"text"`
	// Iptables is the rule in iptables syntax when iptables-nft made it
	// ("-A INPUT -p tcp --dport 80 -j DROP").
	Iptables string `json:"iptables,omitempty"`
	// Verdict is what the rule does to the packets it matches: "drop",
	// "reject", or "accept" or "" for a rate limit in front of one.
	Verdict string `json:"verdict,omitempty"`
	// Limit is the rule's rate limit ("10/second burst 5"), Over when
	// it matches above the rate (nft "limit rate over").
	Limit string `json:"limit,omitempty"`
	Over  bool   `json:"over,omitempty"`
	// Counted is true when the rule has a counter: Packets and Bytes.
	Counted bool   `json:"counted,omitempty"`
	Packets uint64 `json:"packets,omitempty"`
	Bytes   uint64 `json:"bytes,omitempty"`
}

// Softnet is one CPU's line of /proc/net/softnet_stat.
type Softnet struct {
	CPU            int    `json:"cpu"`
	Processed      uint64 `json:"processed"`
	Dropped        uint64 `json:"dropped"`
	TimeSqueeze    uint64 `json:"time_squeeze"`
	ReceivedRPS    uint64 `json:"received_rps"`
	FlowLimitCount uint64 `json:"flow_limit_count"`
	// BacklogLen is the current input queue length (kernel 5.10+), a gauge.
	BacklogLen uint64 `json:"backlog_len"`
}

// CPU is one line of /proc/stat, in USER_HZ ticks. CPU is -1 for the
// aggregate "cpu" line.
type CPU struct {
	CPU     int    `json:"cpu"`
	User    uint64 `json:"user"`
	Nice    uint64 `json:"nice"`
	System  uint64 `json:"system"`
	Idle    uint64 `json:"idle"`
	IOWait  uint64 `json:"iowait"`
	IRQ     uint64 `json:"irq"`
	SoftIRQ uint64 `json:"softirq"`
	Steal   uint64 `json:"steal"`
}

// Total is the sum of all tick fields.
func (c CPU) Total() uint64 {
	return c.User + c.Nice + c.System + c.Idle + c.IOWait + c.IRQ + c.SoftIRQ + c.Steal
}

// Interface is one network device: /proc/net/dev counters plus link
// attributes from rtnetlink and ethtool.
type Interface struct {
	Name      string `json:"name"`
	OperState string `json:"oper_state,omitempty"` // "up", "down", "unknown"…
	MTU       int    `json:"mtu,omitempty"`
	SpeedMbps int    `json:"speed_mbps,omitempty"` // 0 when the driver reports none
	// LinkKind is the rtnetlink link kind: "device" for hardware, else
	// the driver's kind ("veth", "bridge", "bond", "vlan", "tuntap"…).
	// Virtual devices may report a nominal speed they do not enforce
	// (veth 10000, tun 10).
	LinkKind string `json:"link_kind,omitempty"`
	// Qdisc is the kind of the root qdisc; Qdiscs has its details.
	Qdisc     string `json:"qdisc,omitempty"`
	RxBytes   uint64 `json:"rx_bytes"`
	RxPackets uint64 `json:"rx_packets"`
	RxErrs    uint64 `json:"rx_errs"`
	RxDrop    uint64 `json:"rx_drop"`
	RxFifo    uint64 `json:"rx_fifo"`
	RxFrame   uint64 `json:"rx_frame"`
	TxBytes   uint64 `json:"tx_bytes"`
	TxPackets uint64 `json:"tx_packets"`
	TxErrs    uint64 `json:"tx_errs"`
	TxDrop    uint64 `json:"tx_drop"`
	TxFifo    uint64 `json:"tx_fifo"`
	TxColls   uint64 `json:"tx_colls"`
	TxCarrier uint64 `json:"tx_carrier"`
	// Qdiscs are the egress qdiscs that matter for throughput: the root
	// qdisc, every shaping qdisc (tbf, htb) wherever it hangs, and the
	// classes of each htb qdisc. Per-queue children of mq, and ingress
	// and clsact qdiscs, are left out.
	Qdiscs []Qdisc `json:"qdiscs,omitempty"`
	// Link says what the device is and what it is joined to: a veth's
	// peer, a bridge's ports, a tunnel's overhead, a NIC's driver.
	Link *Link `json:"link,omitempty"`
}

// Link is what a network device is, from rtnetlink (IFLA_LINKINFO,
// IFLA_LINK, IFLA_MASTER) and, for a NIC, ethtool: so that a drop is
// read against the device it was headed for (a veth whose peer's MTU is
// smaller, a bridge port smaller than its members, a tunnel's headers).
type Link struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	// NetNS and NetNSName name the device's namespace in Drops.Links (a
	// device elsewhere); 0 for the observed namespace.
	NetNS     uint64 `json:"netns,omitempty"`
	NetNSName string `json:"netns_name,omitempty"`
	MTU       int    `json:"mtu"`
	// Kind is rtnetlink's kind ("veth", "bridge", "bond", "vlan",
	// "macvlan", "ipvlan", "vxlan", "geneve", "ipip", "sit", "gre",
	// "gretap", "ip6tnl", "wireguard", "tun", "tap"…), "device" for a
	// device without one (hardware), "loopback" for lo.
	Kind string `json:"kind"`
	// Mode is a tun's or tap's, a macvlan's, a bond's.
	Mode string `json:"mode,omitempty"`
	// Driver is a physical NIC's driver, from ethtool: only such devices
	// have rings, interrupts and RSS to tune.
	Driver string `json:"driver,omitempty"`
	// Peer is a veth's other end, in whichever namespace it is.
	Peer *LinkRef `json:"peer,omitempty"`
	// Master is the bridge or bond this device is a port of.
	Master *LinkRef `json:"master,omitempty"`
	// Ports are a bridge's or bond's ports, with their MTUs.
	Ports []LinkRef `json:"ports,omitempty"`
	// Lower is the device a vlan, macvlan, ipvlan or tunnel sends
	// through (a vxlan's VTEP device).
	Lower *LinkRef `json:"lower,omitempty"`
	// Overhead is what a tunnel adds to each packet (its outer headers):
	// a packet of MTU bytes inside needs MTU+Overhead below.
	Overhead int `json:"overhead,omitempty"`
	// GSOMaxSize and GSOMaxSegs bound the packets the stack hands the
	// device to segment (GSOMaxSegs 1: it segments everything itself, as
	// for a NIC without TSO); GROMaxSize those it builds on receive.
	// Virtual devices pass a GSO packet larger than their MTU: only
	// frames sent whole are checked against it.
	GSOMaxSize uint32 `json:"gso_max_size,omitempty"`
	GSOMaxSegs uint32 `json:"gso_max_segs,omitempty"`
	GROMaxSize uint32 `json:"gro_max_size,omitempty"`
}

// LinkRef is another device a Link is joined to.
type LinkRef struct {
	Name  string `json:"name,omitempty"`
	Index int    `json:"index"`
	// NetNS and NetNSName name its namespace when it is not the Link's
	// (a veth's peer); 0 when it is, or when it could not be told.
	NetNS     uint64 `json:"netns,omitempty"`
	NetNSName string `json:"netns_name,omitempty"`
	MTU       int    `json:"mtu,omitempty"`
	Kind      string `json:"kind,omitempty"`
	// Master is the bridge or bond it is a port of (a veth's peer in a
	// bridge).
	Master string `json:"master,omitempty"`
	// Unread says why the device could not be read (its namespace not
	// found), "" when it was.
	Unread string `json:"unread,omitempty"`
}

// Qdisc is one queueing discipline or traffic class on an interface's
// egress, as `tc -s qdisc` and `tc -s class` show it. Bytes, Packets,
// Drops, Overlimits and Requeues are cumulative counters; BacklogBytes
// and Qlen are gauges sampled at the snapshot. A qdisc that is replaced
// starts its counters again from 0.
type Qdisc struct {
	// Class is true for a class of a classful qdisc (an htb class), false
	// for a qdisc.
	Class bool   `json:"class,omitempty"`
	Kind  string `json:"kind"` // "tbf", "htb", "fq_codel", "noqueue"…
	// Handle and Parent are as tc prints them: "1:" for a qdisc, "1:10"
	// for a class, "root" for a parent that is the device itself.
	Handle string `json:"handle"`
	Parent string `json:"parent"`
	// RateBytesPerSec is the shaping rate: a tbf's rate, an htb class's
	// guaranteed rate; 0 when the qdisc has none. CeilBytesPerSec is an
	// htb class's ceiling, the most it may send by borrowing.
	RateBytesPerSec uint64 `json:"rate_bytes_per_sec,omitempty"`
	CeilBytesPerSec uint64 `json:"ceil_bytes_per_sec,omitempty"`
	// BurstBytes is a tbf's bucket size and LimitBytes its queue limit.
	BurstBytes uint64 `json:"burst_bytes,omitempty"`
	LimitBytes uint64 `json:"limit_bytes,omitempty"`

	Bytes        uint64 `json:"bytes"`
	Packets      uint64 `json:"packets"`
	Drops        uint64 `json:"drops"`
	Overlimits   uint64 `json:"overlimits"`
	Requeues     uint64 `json:"requeues"`
	BacklogBytes uint64 `json:"backlog_bytes"`
	Qlen         uint64 `json:"qlen"`
}

// Conntrack is the connection-tracking table of the observed namespace.
type Conntrack struct {
	Count   uint64 `json:"count"`
	Max     uint64 `json:"max"`
	Buckets uint64 `json:"buckets"`
	// Stats sums the per-CPU columns of /proc/net/stat/nf_conntrack by
	// column name: "drop", "early_drop", "insert_failed", "search_restart"…
	// Read over netlink, the same counters carry the same names
	// ("icmp_error", "clashres" and "chainlength" as procfs prints them);
	// procfs's always-zero columns (new, ignore, delete) are absent.
	Stats map[string]uint64 `json:"stats,omitempty"`
	// Source is where Stats came from: "procfs", or "netlink" (ctnetlink)
	// on kernels without /proc/net/stat/nf_conntrack. With "netlink" and
	// no nf_conntrack sysctls, Count and Max came from netlink too, and
	// Buckets is 0. Empty when there are no Stats.
	Source string `json:"source,omitempty"`
}

// TCP states as the kernel numbers them (include/net/tcp_states.h).
var TCPStates = [...]string{
	1: "ESTABLISHED", 2: "SYN_SENT", 3: "SYN_RECV", 4: "FIN_WAIT1", 5: "FIN_WAIT2",
	6: "TIME_WAIT", 7: "CLOSE", 8: "CLOSE_WAIT", 9: "LAST_ACK", 10: "LISTEN",
	11: "CLOSING", 12: "NEW_SYN_RECV",
}

// Sockets is what a sock_diag dump showed.
type Sockets struct {
	// TCP counts TCP sockets (v4 and v6) per state name.
	TCP map[string]int `json:"tcp"`
	// Unix counts unix stream sockets per state name.
	Unix      map[string]int `json:"unix,omitempty"`
	Listeners []Listener     `json:"listeners"`
	// Remotes counts connections per remote address:port, busiest first,
	// at most MaxRemotes entries.
	Remotes []Remote `json:"remotes,omitempty"`
	// Note says what was estimated rather than dumped, e.g. ESTABLISHED
	// taken from Tcp.CurrEstab when there were too many to list cheaply.
	Note string `json:"note,omitempty"`
	// Drops are the UDP and TCP sockets (listeners aside: their drops
	// are Listener.Drops) whose own drop counter is above 0, the most
	// drops first, at most MaxSocketDrops.
	Drops []SocketDrops `json:"drops,omitempty"`
}

// MaxSocketDrops bounds Sockets.Drops.
const MaxSocketDrops = 64

// SocketDrops is one socket that dropped packets: sk_drops
// (SK_MEMINFO_DROPS), raised for each datagram or segment it could not
// take — its receive buffer full (a UDP receiver's SO_RCVBUF), its
// backlog full while the application held it, memory pressure.
type SocketDrops struct {
	Proto  string `json:"proto"` // "udp", "udp6", "tcp", "tcp6"
	Local  string `json:"local"`
	Remote string `json:"remote,omitempty"` // a connected socket's peer
	Inode  uint64 `json:"inode"`
	// Drops is the socket's counter since it was created.
	Drops uint64 `json:"drops"`
	// RcvBuf is its receive buffer's limit (SO_RCVBUF as the kernel
	// doubled it), RmemAlloc the bytes it held when sampled, RecvQ the
	// data waiting to be read.
	RcvBuf    uint32 `json:"rcvbuf"`
	RmemAlloc uint32 `json:"rmem_alloc"`
	RecvQ     uint32 `json:"recv_q,omitempty"`
	// PIDs owning it, lowest first, and the first one's command name.
	PIDs    []int  `json:"pids,omitempty"`
	Process string `json:"process,omitempty"`
}

// MaxRemotes bounds Sockets.Remotes.
const MaxRemotes = 64

// Listener is one listening socket.
type Listener struct {
	Proto string `json:"proto"` // "tcp", "tcp6" or "unix"
	Addr  string `json:"addr"`  // "10.0.0.1:80", "[::]:443" or a unix path
	Port  int    `json:"port,omitempty"`
	// RecvQ is the accept queue length: connections established but not
	// yet accept()ed. SendQ is the effective backlog, min(listen() backlog,
	// net.core.somaxconn). The queue is full when RecvQ > SendQ. Their
	// names are ss's columns; in JSON they are what they are for a
	// listener, accept_queue and backlog (version 1: recv_q, send_q).
	RecvQ uint32 `json:"accept_queue"`
	SendQ uint32 `json:"backlog"`
	Inode uint64 `json:"inode"`
	// Drops is sk_drops of the listening socket, a counter since it
	// was created, which tcp_listendrop() increments for every SYN or
	// ACK dropped on that listener (accept queue full, SYN queue
	// overflow, ...): the per-port figure of TcpExt.ListenDrops. Each
	// socket of a SO_REUSEPORT group is a Listener of its own with its
	// own count; sum them for the port. Absent (0) for unix listeners
	// and on kernels older than 3.19, which do not report it.
	Drops uint64 `json:"drops,omitempty"`
	// Established counts the ESTABLISHED connections on the listener's
	// port, those still in its accept queue included; Unread those of
	// them holding bytes the server has not read (Recv-Q > 0): in a
	// worker pool, requests waiting for a free worker. CloseWait counts
	// the port's connections its clients closed and the server has not:
	// a server stuck before it reads the end of the connection. Every
	// listener on one port (IPv4 and IPv6, several addresses) carries the
	// same counts; they are absent when ESTABLISHED sockets were not
	// dumped (see Sockets.Note).
	Established int `json:"established,omitempty"`
	Unread      int `json:"unread,omitempty"`
	CloseWait   int `json:"close_wait,omitempty"`
	// PIDs owning the socket (a forking server shares it), lowest first.
	PIDs    []int  `json:"pids,omitempty"`
	Process string `json:"process,omitempty"`
}

// Remote counts outgoing TCP connections to one remote address and port:
// sockets whose local port is not a listening port. Connections accepted
// by a local listener are not counted here (their remotes are clients).
type Remote struct {
	Addr        string `json:"addr"` // "10.0.0.2:9000"
	Established int    `json:"established"`
	TimeWait    int    `json:"time_wait"`
	Other       int    `json:"other"`
	// Ephemeral counts those whose local port is in ip_local_port_range:
	// the outgoing connections that compete for local ports.
	Ephemeral int `json:"ephemeral"`
}

// Process is a process of interest: one that owns a listener, or one the
// user named.
type Process struct {
	PID  int    `json:"pid"`
	PPID int    `json:"ppid,omitempty"`
	Comm string `json:"comm"`
	// State is the scheduler state letter: "R" running, "S" sleeping,
	// "D" uninterruptible (usually I/O)…
	State      string `json:"state,omitempty"`
	Threads    int    `json:"threads"`
	OpenFDs    int    `json:"open_fds"`
	NofileSoft uint64 `json:"nofile_soft"` // 0 means unlimited
	NofileHard uint64 `json:"nofile_hard"`
	UTime      uint64 `json:"utime"` // USER_HZ ticks
	STime      uint64 `json:"stime"`
	// StartTime is when the process started, in USER_HZ ticks after
	// boot: with the PID it names one process, as PIDs are reused.
	StartTime uint64 `json:"start_time,omitempty"`
	Role      string `json:"role,omitempty"` // e.g. "listener :80"
}

// KernelMsg is one /dev/kmsg record written after the collection started.
type KernelMsg struct {
	// Time is the wall-clock time, derived from the record's monotonic
	// timestamp and the boot time.
	Time     time.Time `json:"time"`
	Priority int       `json:"priority"`
	Text     string    `json:"text"`
	// Class names what the message means, e.g. "conntrack-table-full",
	// "syn-flooding", "timewait-overflow", "out-of-socket-memory"; "" if
	// unclassified.
	Class string `json:"class,omitempty"`
	// NetNS is the namespace inode the message names, if any (6.x
	// conntrack "table full in netns N"); Port the listening port a SYN
	// flooding message names. The log is shared by all namespaces, so
	// rules use these to keep other namespaces' messages out.
	NetNS uint64 `json:"netns,omitempty"`
	Port  int    `json:"port,omitempty"`
	// Family is the table a neighbour table overflow names: "ipv4" or
	// "ipv6".
	Family string `json:"family,omitempty"`
}

// Resolver is the DNS configuration and a probe of each nameserver.
type Resolver struct {
	ConfPath    string     `json:"conf_path"`
	Nameservers []string   `json:"nameservers"`
	Search      []string   `json:"search,omitempty"`
	Options     []string   `json:"options,omitempty"`
	Probes      []DNSProbe `json:"probes,omitempty"`
}

// DNSProbe is one query sent straight to one nameserver.
type DNSProbe struct {
	Server   string        `json:"server"`
	Type     string        `json:"type"` // "A" or "PTR"
	Name     string        `json:"name"`
	Duration time.Duration `json:"duration_ns"`
	// Rcode is the DNS response code ("NOERROR", "NXDOMAIN", "SERVFAIL"…);
	// empty when no answer came.
	Rcode string `json:"rcode,omitempty"`
	Err   string `json:"error,omitempty"` // "timeout", "connection refused"…
}
