package evidence

import (
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
)

// BundleVersion is the version of the bundle files (File) this netdoctor
// writes; Read refuses a newer one. Version 2 names counters as nstat
// does and a listener's queue and backlog accept_queue and backlog, and
// its files say their kind (those written before it said so are read
// all the same); version 1 is still read.
const BundleVersion = 2

// Bundle is a series of snapshots taken from one network namespace: a
// namespace's bundle file (KindNamespace, what `netdoctor collect` and
// the agent's incidents write and `netdoctor diagnose` reads), a run's
// side, and the window a rule reads.
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
	// incident was written: the servers' outbound connections per
	// destination. diagnose reads them back with the snapshots.
	Dependencies *Traced `json:"dependencies,omitempty"`
	// Profile is an on-CPU profile of the servers the agent follows,
	// taken for a few seconds from the moment of the incident;
	// ProfileError says why there is none.
	Profile      *cpuprof.Profile `json:"profile,omitempty"`
	ProfileError string           `json:"profile_error,omitempty"`
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
	// PID is the netdoctor process that took the bundle, in the PID
	// namespace PIDNSInode: a run's other sides on the same kernel and
	// PID namespace name it among the processes they saw, and it is
	// netdoctor's own (the load generator, an agent), never a
	// neighbour of the servers.
	PID        int    `json:"pid,omitempty"`
	PIDNSInode uint64 `json:"pidns_inode,omitempty"`
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
	// flooding message names, and Addr its bound address ("" in the old
	// form that names only the port; "::" without brackets). The log is
	// shared by all namespaces, so rules use these to keep other
	// namespaces' messages out.
	NetNS uint64 `json:"netns,omitempty"`
	Port  int    `json:"port,omitempty"`
	Addr  string `json:"addr,omitempty"`
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
