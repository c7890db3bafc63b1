package tune

import (
	"strconv"
	"strings"
)

// normalize writes a multi-value setting ("20000\t20050") with single
// spaces.
func normalize(v string) string { return strings.Join(strings.Fields(v), " ") }

// atoi is a setting's first number, 0 when it has none.
func atoi(s string) int {
	n, _ := strconv.Atoi(strings.Fields(s + " 0")[0])
	return n
}

// isLimit is a setting that bounds a resource: it only ever goes up.
func isLimit(name string) bool {
	switch name {
	case "net.core.somaxconn", "net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets",
		"net.ipv4.tcp_max_tw_buckets", "fs.file-max", "fs.nr_open", "net.core.netdev_max_backlog",
		"net.ipv4.tcp_max_syn_backlog", "net.core.rmem_max", "net.core.wmem_max", "net.ipv4.ip_local_port_range",
		"net.ipv4.neigh.default.gc_thresh1", "net.ipv4.neigh.default.gc_thresh2", "net.ipv4.neigh.default.gc_thresh3",
		"net.ipv6.neigh.default.gc_thresh1", "net.ipv6.neigh.default.gc_thresh2", "net.ipv6.neigh.default.gc_thresh3",
		"net.ipv4.tcp_keepalive_time":
		return true
	}
	return false
}

// larger compares two values of one setting: numbers by value, a port
// range by width.
func larger(a, b string) bool {
	if strings.Contains(a, " ") || strings.Contains(b, " ") {
		if fa, fb := strings.Fields(a), strings.Fields(b); len(fa) == 2 && len(fb) == 2 {
			return rangeWidth(a) > rangeWidth(b)
		}
		return a > b
	}
	x, e1 := strconv.ParseInt(a, 10, 64)
	y, e2 := strconv.ParseInt(b, 10, 64)
	if e1 != nil || e2 != nil {
		return a > b
	}
	return x > y
}

// rangeWidth is how many ports a "low high" range holds (0: not a range).
func rangeWidth(v string) int {
	f := strings.Fields(v)
	if len(f) != 2 {
		return 0
	}
	return atoi(f[1]) - atoi(f[0]) + 1
}
