// SPDX-License-Identifier: GPL-2.0
//
// netdoctor's drop monitor: every packet the kernel frees as dropped
// (tracepoint skb:kfree_skb, with its SKB_DROP_REASON_*) counted by where
// it died and, in a ledger, by flow (its 5-tuple, and conntrack's
// original tuple when the packet carries a conntrack entry: the flow as
// its client opened it, before NAT); and every TCP retransmission
// counted by flow with its size. Counts only: no event leaves the
// kernel, so nothing can be lost in a ring. The exact counts have a
// bounded table that counts what it cannot hold as overflowed; the
// per-flow tables are LRU tables that evict the flows hit least
// recently, counting every key they insert so that user space knows how
// many were evicted (inserted, less those still there): a flood of new
// flows never blinds them to the next one.
//
// Regenerate the Go bindings and objects with `go generate
// ./internal/dropmon` (clang 14 or later and libbpf's headers: Debian's
// clang and libbpf-dev). The objects are committed: `make build` needs
// only Go.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

// The kernel's structures, only the fields read here; CO-RE finds each
// field in the running kernel's BTF at load time, whatever its offset.
struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

typedef struct {
	struct net *net;
} possible_net_t;

struct net_device {
	int ifindex;
	char name[16];
	possible_net_t nd_net;
} __attribute__((preserve_access_index));

struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	possible_net_t skc_net;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
} __attribute__((preserve_access_index));

struct tcp_sock {
	__u32 mss_cache;
} __attribute__((preserve_access_index));

struct sk_buff {
	struct net_device *dev;
	struct sock *sk;
	unsigned int len;
	__be16 protocol;
	__u16 transport_header;
	__u16 network_header;
	unsigned char *head;
	unsigned long _nfct;
} __attribute__((preserve_access_index));

// Conntrack's entry (include/net/netfilter/nf_conntrack.h): the skb's
// _nfct is its address with the packet's ctinfo in the low 3 bits.
union nf_inet_addr {
	__u32 all[4];
} __attribute__((preserve_access_index));

union nf_conntrack_man_proto {
	__be16 all;
} __attribute__((preserve_access_index));

struct nf_conntrack_man {
	union nf_inet_addr u3;
	union nf_conntrack_man_proto u;
	__u16 l3num;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple {
	struct nf_conntrack_man src;
	struct {
		union nf_inet_addr u3;
		union {
			__be16 all;
		} __attribute__((preserve_access_index)) u;
		__u8 protonum;
	} __attribute__((preserve_access_index)) dst;
} __attribute__((preserve_access_index));

struct nf_conntrack_tuple_hash {
	struct nf_conntrack_tuple tuple;
} __attribute__((preserve_access_index));

struct nf_conn {
	struct nf_conntrack_tuple_hash tuplehash[2];
	unsigned long status;
} __attribute__((preserve_access_index));

#define NFCT_INFOMASK 7UL
#define IP_CT_IS_REPLY 3
#define IP_CT_UNTRACKED 7
#define IPS_TEMPLATE (1UL << 11)

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_SCTP 132

// The tables' default sizes; the loader may set others.
#define LEDGER_ENTRIES 16384
#define RETRANS_ENTRIES 8192

// The exact count of every drop, by everything but the flow.
struct drop_key {
	__u32 netns;     // network namespace inode; 0 when the packet names none
	__u32 reason;    // enum skb_drop_reason, as this kernel numbers it
	__u64 location;  // the kernel address that freed it
	__s32 ifindex;   // the device it was on, 0 for none
	__u16 ethertype; // skb->protocol, host order
	__u8 ipproto;    // IPPROTO_*, 0 when not IP or unread
	__u8 pad;
	char ifname[16];
};

struct drop_val {
	__u64 packets;
	__u64 bytes;
};

// Flags of a ledger key.
#define FLOW_SOCKET 1    // sock_port is the local socket's port
#define FLOW_FROM_SOCK 2 // the tuple is the socket's: the packet's headers were not readable
#define FLOW_CT 4        // ct_* are conntrack's original tuple, from the packet's entry
#define FLOW_CT_REPLY 8  // the packet went in the reply direction of that entry

// A drop in the ledger: where it died and the flow it belonged to.
struct ledger_key {
	__u32 netns;
	__u32 reason;
	__u64 location;
	__s32 ifindex;
	__u16 ethertype; // as in drops: skb->protocol
	__u8 ipproto;    // as in drops: the packet's, 0 when unread
	__u8 flags;
	__u8 family;     // the flow's: AF_INET or AF_INET6
	__u8 proto;      // the flow's transport protocol
	__u16 sock_port; // the local socket's port (FLOW_SOCKET), host order
	__u16 sport;     // the flow's ports, host order
	__u16 dport;
	__u16 ct_sport; // conntrack's original tuple (FLOW_CT)
	__u16 ct_dport;
	__u8 ct_proto;
	__u8 pad[3];
	__u8 saddr[16]; // IPv4 in the first 4 bytes
	__u8 daddr[16];
	__u8 ct_saddr[16];
	__u8 ct_daddr[16];
};

struct ledger_val {
	__u64 packets;
	__u64 bytes;
	__u32 max_len; // the largest packet dropped
	__u32 pad;
};

struct flow_key {
	__u32 netns;
	__u16 family;
	__u16 sport; // local port, host order
	__u16 dport; // remote port, host order
	__u16 pad;
	__u8 saddr[16];
	__u8 daddr[16];
};

struct flow_val {
	__u64 skbs;  // retransmitted skbs
	__u64 bytes; // payload bytes retransmitted
	__u64 full;  // skbs of at least one MSS
	__u32 max_len;
	__u32 mss; // tcp_sock mss_cache at the last retransmission
};

// Stats slots.
#define STAT_DROPS 0          // every kfree_skb seen
#define STAT_DROPS_OVERFLOW 1 // drops not counted: the drops map was full
#define STAT_RETRANS 2        // every retransmission seen
#define STAT_RETRANS_OVERFLOW 3 // retransmissions the LRU table refused (no free node)
#define STAT_LEDGER_NEW 4       // keys inserted into the ledger
#define STAT_LEDGER_OVERFLOW 5  // drops the LRU ledger refused (no free node)
#define STAT_RETRANS_NEW 6      // keys inserted into the retransmissions' table
#define STAT_MAX 7

// drops counts every drop exactly, by everything but the flow: a few
// hundred keys at most (reasons × functions × devices × namespaces).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct drop_key);
	__type(value, struct drop_val);
} drops SEC(".maps");

// ledger attributes them to flows. Flows are many (every client port is
// one): the least recently hit keys make room, so a flow that keeps
// dropping keeps its count while one-off flows come and go; the exact
// totals are in drops, the number evicted is STAT_LEDGER_NEW less the
// keys present.
//
// One value for all CPUs, added to atomically: a per-CPU value would be
// copied once per possible CPU at every read, for thousands of keys.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, LEDGER_ENTRIES);
	__type(key, struct ledger_key);
	__type(value, struct ledger_val);
} ledger SEC(".maps");

// retrans is an LRU table too: connections to nowhere, retransmitting
// their SYNs until they give up, make room for the next flow instead of
// filling it for good.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, RETRANS_ENTRIES);
	__type(key, struct flow_key);
	__type(value, struct flow_val);
} retrans SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void stat_inc(__u32 slot)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &slot);
	if (v)
		*v += 1;
}

// The programs are tp_btf: their arguments are typed pointers the
// verifier lets them read directly (a fault reads 0), cheaper than a
// bpf_probe_read_kernel() a field. Only the packet's bytes and the
// conntrack entry, behind plain pointers, are copied with it.
static __always_inline __u32 net_inum(struct net *net)
{
	if (!net)
		return 0;
	return net->ns.inum;
}

// packet_flow reads the IP protocol, addresses and ports from the
// packet's headers, where the network header is set. It returns 1 when
// it read the protocol.
static __always_inline int packet_flow(struct sk_buff *skb, __u16 ethertype, struct ledger_key *k)
{
	__u16 nh = skb->network_header;
	unsigned char *head = skb->head;
	// Unset: ~0, or 0 in a buffer being built (a segment the IP layer
	// has not yet given its header, dropped for want of a route).
	if (nh == (__u16)~0U || nh == 0 || !head)
		return 0;
	unsigned char *ip = head + nh;
	__u8 proto = 0;
	unsigned char *l4 = 0;
	if (ethertype == ETH_P_IP) {
		__u8 vihl = 0;
		if (bpf_probe_read_kernel(&vihl, 1, ip))
			return 0;
		if ((vihl >> 4) != 4 || (vihl & 0xf) < 5)
			return 0;
		bpf_probe_read_kernel(&proto, 1, ip + 9);
		bpf_probe_read_kernel(k->saddr, 4, ip + 12);
		bpf_probe_read_kernel(k->daddr, 4, ip + 16);
		l4 = ip + (vihl & 0xf) * 4;
		k->family = AF_INET;
	} else if (ethertype == ETH_P_IPV6) {
		__u8 v = 0;
		if (bpf_probe_read_kernel(&v, 1, ip))
			return 0;
		if ((v >> 4) != 6)
			return 0;
		bpf_probe_read_kernel(&proto, 1, ip + 6);
		bpf_probe_read_kernel(k->saddr, 16, ip + 8);
		bpf_probe_read_kernel(k->daddr, 16, ip + 24);
		l4 = ip + 40;
		k->family = AF_INET6;
	} else {
		return 0;
	}
	k->ipproto = proto;
	k->proto = proto;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) {
		__be16 ports[2] = {};
		bpf_probe_read_kernel(&ports, 4, l4);
		k->sport = bpf_ntohs(ports[0]);
		k->dport = bpf_ntohs(ports[1]);
	}
	return 1;
}

// socket_flow is the flow of a socket, for a packet whose headers could
// not be read: its local end as the source.
static __always_inline void socket_flow(struct sock *sk, struct ledger_key *k)
{
	__u16 family = sk->__sk_common.skc_family;
	if (family == AF_INET) {
		__be32 s = sk->__sk_common.skc_rcv_saddr;
		__be32 d = sk->__sk_common.skc_daddr;
		__builtin_memcpy(k->saddr, &s, 4);
		__builtin_memcpy(k->daddr, &d, 4);
	} else if (family == AF_INET6) {
		__builtin_memcpy(k->saddr, sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8, 16);
		__builtin_memcpy(k->daddr, sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8, 16);
	} else {
		return;
	}
	k->family = family;
	k->proto = (__u8)sk->sk_protocol;
	k->sport = sk->__sk_common.skc_num;
	k->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	k->flags |= FLOW_FROM_SOCK;
}

// conntrack_flow copies the original tuple of the packet's conntrack
// entry, when it has one: the flow as its first packet was, before any
// NAT, whichever way this packet went.
static __always_inline void conntrack_flow(struct sk_buff *skb, struct ledger_key *k)
{
	if (!bpf_core_field_exists(skb->_nfct))
		return;
	unsigned long nfct = skb->_nfct;
	unsigned long ctinfo = nfct & NFCT_INFOMASK;
	struct nf_conn *ct = (struct nf_conn *)(nfct & ~NFCT_INFOMASK);
	if (!ct || ctinfo == IP_CT_UNTRACKED)
		return;
	unsigned long status = 0;
	if (bpf_core_read(&status, sizeof(status), &ct->status) || (status & IPS_TEMPLATE))
		return;
	struct nf_conntrack_tuple *t = &ct->tuplehash[0].tuple;
	__be16 sp = 0, dp = 0;
	if (bpf_core_read(k->ct_saddr, 16, &t->src.u3) || bpf_core_read(k->ct_daddr, 16, &t->dst.u3))
		return;
	bpf_core_read(&sp, 2, &t->src.u.all);
	bpf_core_read(&dp, 2, &t->dst.u.all);
	bpf_core_read(&k->ct_proto, 1, &t->dst.protonum);
	k->ct_sport = bpf_ntohs(sp);
	k->ct_dport = bpf_ntohs(dp);
	k->flags |= FLOW_CT;
	if (ctinfo >= IP_CT_IS_REPLY)
		k->flags |= FLOW_CT_REPLY;
}

// ledger_add counts a drop under its flow.
static __always_inline void ledger_add(struct ledger_key *k, __u32 len)
{
	struct ledger_val *v = bpf_map_lookup_elem(&ledger, k);
	if (!v) {
		struct ledger_val init = {.packets = 1, .bytes = len, .max_len = len};
		if (!bpf_map_update_elem(&ledger, k, &init, BPF_NOEXIST)) {
			stat_inc(STAT_LEDGER_NEW);
			return;
		}
		// Inserted by another CPU meanwhile, or no node free.
		v = bpf_map_lookup_elem(&ledger, k);
		if (!v) {
			stat_inc(STAT_LEDGER_OVERFLOW);
			return;
		}
	}
	__sync_fetch_and_add(&v->packets, 1);
	__sync_fetch_and_add(&v->bytes, len);
	if (len > v->max_len)
		v->max_len = len;
}

static __always_inline int count_drop(struct sk_buff *skb, void *location, int reason, struct sock *rx_sk)
{
	stat_inc(STAT_DROPS);

	struct drop_key k = {};
	k.reason = reason;
	k.location = (__u64)location;
	k.ethertype = bpf_ntohs(skb->protocol);

	struct net_device *dev = skb->dev;
	if (dev) {
		k.ifindex = dev->ifindex;
		__builtin_memcpy(k.ifname, dev->name, sizeof(k.ifname));
		k.netns = net_inum(dev->nd_net.net);
	}

	struct ledger_key f = {};
	f.ethertype = k.ethertype;
	int read = packet_flow(skb, k.ethertype, &f);
	k.ipproto = f.ipproto;

	// The socket that owned or was to receive it names the namespace
	// and the local port: rx_sk (6.11+) when the receive path found
	// one, else the skb's own (a packet being sent, or demuxed early).
	struct sock *sk = rx_sk;
	if (!sk)
		sk = skb->sk;
	if (sk) {
		__u32 inum = net_inum(sk->__sk_common.skc_net.net);
		if (inum)
			k.netns = inum;
		__u16 num = sk->__sk_common.skc_num;
		if (num) {
			f.sock_port = num;
			f.flags |= FLOW_SOCKET;
			// A packet that is not the socket's (neither port is
			// its own) was read from stale bytes: the socket's
			// flow is the one known.
			if (!read || (f.sport != num && f.dport != num && f.proto == sk->sk_protocol))
				socket_flow(sk, &f);
		}
	}

	__u32 len = skb->len;
	// A flow is a transport's: ports, from the packet or its socket. A
	// packet that carries nothing (a closed socket's queue purged of its
	// FIN, one skb for every connection a server closes) is counted in
	// drops alone: in the ledger it would take a row per connection.
	if (len && (f.sport || f.dport || f.sock_port)) {
		f.netns = k.netns;
		f.reason = k.reason;
		f.location = k.location;
		f.ifindex = k.ifindex;
		conntrack_flow(skb, &f);
		ledger_add(&f, len);
	}

	struct drop_val init = {.packets = 1, .bytes = len};
	struct drop_val *v = bpf_map_lookup_elem(&drops, &k);
	if (v) {
		v->packets++;
		v->bytes += len;
		return 0;
	}
	if (!bpf_map_update_elem(&drops, &k, &init, BPF_NOEXIST))
		return 0;
	// Another CPU may have inserted the key meanwhile; if not, the map
	// is full.
	v = bpf_map_lookup_elem(&drops, &k);
	if (v) {
		v->packets++;
		v->bytes += len;
		return 0;
	}
	stat_inc(STAT_DROPS_OVERFLOW);
	return 0;
}

static __always_inline int count_retrans(struct sock *sk, struct sk_buff *skb)
{
	stat_inc(STAT_RETRANS);

	struct flow_key k = {};
	k.netns = net_inum(sk->__sk_common.skc_net.net);
	k.family = sk->__sk_common.skc_family;
	k.sport = sk->__sk_common.skc_num;
	k.dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (k.family == AF_INET) {
		__be32 s = sk->__sk_common.skc_rcv_saddr;
		__be32 d = sk->__sk_common.skc_daddr;
		__builtin_memcpy(k.saddr, &s, 4);
		__builtin_memcpy(k.daddr, &d, 4);
	} else if (k.family == AF_INET6) {
		__builtin_memcpy(k.saddr, sk->__sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8, 16);
		__builtin_memcpy(k.daddr, sk->__sk_common.skc_v6_daddr.in6_u.u6_addr8, 16);
	}

	__u32 len = skb->len;
	// A retransmitted socket is a full TCP socket (tcp_sock), which its
	// typed pointer does not say: read through the kernel's copy.
	__u32 mss = BPF_CORE_READ((struct tcp_sock *)sk, mss_cache);
	__u64 full = mss && len >= mss;
	struct flow_val *v = bpf_map_lookup_elem(&retrans, &k);
	if (!v) {
		struct flow_val init = {.skbs = 1, .bytes = len, .full = full, .max_len = len, .mss = mss};
		if (!bpf_map_update_elem(&retrans, &k, &init, BPF_NOEXIST)) {
			stat_inc(STAT_RETRANS_NEW);
			return 0;
		}
		v = bpf_map_lookup_elem(&retrans, &k);
		if (!v) {
			stat_inc(STAT_RETRANS_OVERFLOW);
			return 0;
		}
	}
	__sync_fetch_and_add(&v->skbs, 1);
	__sync_fetch_and_add(&v->bytes, len);
	if (full)
		__sync_fetch_and_add(&v->full, 1);
	if (len > v->max_len)
		v->max_len = len;
	v->mss = mss;
	return 0;
}

// Each tracepoint in two shapes: a tp_btf program may read only the
// arguments its kernel passes, so the loader keeps the one that matches
// the running kernel's BTF (btf_trace_kfree_skb, btf_trace_tcp_retransmit_skb).

// 6.11+: the socket the receive path found, if any.
SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb, struct sk_buff *skb, void *location, int reason, struct sock *rx_sk)
{
	return count_drop(skb, location, reason, rx_sk);
}

// 5.17 to 6.10.
SEC("tp_btf/kfree_skb")
int BPF_PROG(kfree_skb_norxsk, struct sk_buff *skb, void *location, int reason)
{
	return count_drop(skb, location, reason, 0);
}

// 6.x with the result: a failed retransmission sent nothing.
SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retransmit_skb, struct sock *sk, struct sk_buff *skb, int err)
{
	if (err)
		return 0;
	return count_retrans(sk, skb);
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retransmit_skb_noerr, struct sock *sk, struct sk_buff *skb)
{
	return count_retrans(sk, skb);
}
