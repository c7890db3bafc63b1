// Package conntrack reads the connection-tracking table over ctnetlink
// (NETLINK_NETFILTER): its statistics, for kernels built without
// CONFIG_NF_CONNTRACK_PROCFS, which lack /proc/net/stat/nf_conntrack,
// and single entries looked up by tuple in any namespace (Get), which
// the drop monitor uses to follow a flow through NAT. The encoding and
// decoding are pure and fuzzed; the socket is Linux only.
package conntrack
