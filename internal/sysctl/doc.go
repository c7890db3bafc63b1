// Package sysctl reads and writes kernel settings (/proc/sys) inside a
// network namespace. Settings under /proc/sys/net belong to the namespace
// of the thread that opens them, so each read and write runs inside
// netns.NS.Do; host-wide settings (net.netfilter.nf_conntrack_max, fs.*,
// net.core.rmem_max…) are read and written in netns.Initial(). Reads go
// through procnet, the one parser, so a value reads here as it does in a
// collected bundle.
package sysctl
