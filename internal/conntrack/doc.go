// Package conntrack reads the statistics of the connection-tracking
// table over ctnetlink (NETLINK_NETFILTER), for kernels built without
// CONFIG_NF_CONNTRACK_PROCFS, which lack /proc/net/stat/nf_conntrack. The
// decoding is pure and fuzzed; the socket is Linux only.
package conntrack
