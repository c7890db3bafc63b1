// SPDX-License-Identifier: GPL-2.0
//
// netdoctor's drop monitor: every packet the kernel frees as dropped
// (tracepoint skb:kfree_skb, with its SKB_DROP_REASON_*) counted by where
// it died, and every TCP retransmission counted by flow with its size.
// Counts only: no event leaves the kernel, so nothing can be lost in a
// ring; a key that finds its map full is counted as overflowed instead.
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
} __attribute__((preserve_access_index));

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6
#define IPPROTO_UDP 17
#define IPPROTO_SCTP 132

// Flags of a drop key.
#define DROP_SOCKET 1  // port is a local socket's port, not the packet's
#define DROP_SRCPORT 2 // port is the packet's source port (a server's reply)

// EPHEMERAL_LOW is where Linux's default ip_local_port_range begins.
#define EPHEMERAL_LOW 32768

struct drop_key {
	__u32 netns;     // network namespace inode; 0 when the packet names none
	__u32 reason;    // enum skb_drop_reason, as this kernel numbers it
	__u64 location;  // the kernel address that freed it
	__s32 ifindex;   // the device it was on, 0 for none
	__u16 ethertype; // skb->protocol, host order
	__u8 ipproto;    // IPPROTO_*, 0 when not IP or unread
	__u8 flags;
	__u16 port;      // local socket's port, else the packet's service port
	__u16 pad;
	char ifname[16];
};

struct drop_val {
	__u64 packets;
	__u64 bytes;
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
#define STAT_RETRANS_OVERFLOW 3
#define STAT_MAX 4

// drops counts every drop exactly, by everything but the port: a few
// hundred keys at most (reasons × functions × devices × namespaces).
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 2048);
	__type(key, struct drop_key);
	__type(value, struct drop_val);
} drops SEC(".maps");

// drop_ports attributes them to ports. Ports are many where they are
// ephemeral (a closing connection's purged queue, a stray segment after
// a close): the least recently hit keys make room, so a busy port keeps
// its count while one-off ports come and go; the exact total is in drops.
//
// One value for all CPUs, added to atomically: a per-CPU value would be
// copied once per possible CPU at every read, for thousands of keys.
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, struct drop_key);
	__type(value, struct drop_val);
} drop_ports SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, 4096);
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
// bpf_probe_read_kernel() a field. Only the packet's bytes, behind a
// plain pointer, are copied with it.
static __always_inline __u32 net_inum(struct net *net)
{
	if (!net)
		return 0;
	return net->ns.inum;
}

// packet_ports reads the IP protocol and the destination port from the
// packet's headers, where the network header is set.
static __always_inline void packet_ports(struct sk_buff *skb, struct drop_key *k)
{
	__u16 nh = skb->network_header;
	unsigned char *head = skb->head;
	if (nh == (__u16)~0U || !head)
		return;
	unsigned char *ip = head + nh;
	__u8 proto = 0;
	unsigned char *l4 = 0;
	if (k->ethertype == ETH_P_IP) {
		__u8 vihl = 0;
		if (bpf_probe_read_kernel(&vihl, 1, ip))
			return;
		if ((vihl >> 4) != 4)
			return;
		bpf_probe_read_kernel(&proto, 1, ip + 9);
		l4 = ip + (vihl & 0xf) * 4;
	} else if (k->ethertype == ETH_P_IPV6) {
		__u8 v = 0;
		if (bpf_probe_read_kernel(&v, 1, ip))
			return;
		if ((v >> 4) != 6)
			return;
		bpf_probe_read_kernel(&proto, 1, ip + 6);
		l4 = ip + 40;
	} else {
		return;
	}
	k->ipproto = proto;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP || proto == IPPROTO_SCTP) {
		__be16 ports[2] = {};
		bpf_probe_read_kernel(&ports, 4, l4);
		__u16 sport = bpf_ntohs(ports[0]), dport = bpf_ntohs(ports[1]);
		// The service's port: the destination's, or the source's when
		// only it is below the usual ephemeral range (a reply, from a
		// server to its client, passing through or leaving).
		k->port = dport;
		if (dport >= EPHEMERAL_LOW && sport && sport < EPHEMERAL_LOW) {
			k->port = sport;
			k->flags |= DROP_SRCPORT;
		}
	}
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
	packet_ports(skb, &k);

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
			k.port = num;
			k.flags = DROP_SOCKET;
		}
	}

	__u32 len = skb->len;
	struct drop_val init = {.packets = 1, .bytes = len};
	if (k.port) {
		struct drop_val *pv = bpf_map_lookup_elem(&drop_ports, &k);
		if (pv) {
			__sync_fetch_and_add(&pv->packets, 1);
			__sync_fetch_and_add(&pv->bytes, len);
		} else if (bpf_map_update_elem(&drop_ports, &k, &init, BPF_NOEXIST)) {
			// Inserted by another CPU meanwhile.
			pv = bpf_map_lookup_elem(&drop_ports, &k);
			if (pv) {
				__sync_fetch_and_add(&pv->packets, 1);
				__sync_fetch_and_add(&pv->bytes, len);
			}
		}
		k.port = 0;
		k.flags = 0;
	}
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
	if (v) {
		v->skbs++;
		v->bytes += len;
		v->full += full;
		if (len > v->max_len)
			v->max_len = len;
		v->mss = mss;
		return 0;
	}
	struct flow_val init = {.skbs = 1, .bytes = len, .full = full, .max_len = len, .mss = mss};
	if (!bpf_map_update_elem(&retrans, &k, &init, BPF_NOEXIST))
		return 0;
	v = bpf_map_lookup_elem(&retrans, &k);
	if (v) {
		v->skbs++;
		v->bytes += len;
		v->full += full;
		if (len > v->max_len)
			v->max_len = len;
		v->mss = mss;
		return 0;
	}
	stat_inc(STAT_RETRANS_OVERFLOW);
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
