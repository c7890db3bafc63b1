// Package kernel holds the kernel's records as netdoctor's readers parse
// them: /proc/stat's CPU lines, softnet_stat, /proc/net/dev with the
// interfaces' qdiscs, a process's /proc files, and what a sock_diag dump
// shows. They are part of the evidence (package evidence names each of
// them as its own: evidence.Listener is kernel.Listener), declared here,
// below everything, because the readers that make them (procnet,
// sockdiag) and the applications' discovery (app) sit below the evidence
// model, which holds the servers app finds.
package kernel

import "encoding/json"

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

// listenerJSON is Listener as JSON, with the names of version 1 read too.
type listenerJSON Listener

// UnmarshalJSON reads a listener, and its queue and backlog under the
// names bundles used before version 2 (ss's recv_q and send_q).
func (l *Listener) UnmarshalJSON(b []byte) error {
	var v struct {
		listenerJSON
		RecvQ *uint32 `json:"recv_q"`
		SendQ *uint32 `json:"send_q"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = Listener(v.listenerJSON)
	if v.RecvQ != nil && l.RecvQ == 0 {
		l.RecvQ = *v.RecvQ
	}
	if v.SendQ != nil && l.SendQ == 0 {
		l.SendQ = *v.SendQ
	}
	return nil
}
