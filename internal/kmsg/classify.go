package kmsg

import (
	"net"
	"strconv"
	"strings"
)

// Class names of the kernel messages that Classify recognises.
const (
	ClassConntrackTableFull     = "conntrack-table-full"
	ClassConntrackExpectFull    = "conntrack-expect-full"
	ClassSYNFlooding            = "syn-flooding"
	ClassTimewaitOverflow       = "timewait-overflow"
	ClassOutOfSocketMemory      = "out-of-socket-memory"
	ClassTooManyOrphans         = "too-many-orphans"
	ClassFileMax                = "file-max"
	ClassNeighbourTableOverflow = "neighbour-table-overflow"
	ClassRatelimitSuppressed    = "ratelimit-suppressed"
	ClassTxTimeout              = "tx-timeout"
	ClassLinkDown               = "link-down"
	ClassPageAllocFailure       = "page-alloc-failure"
	ClassPortRangeParity        = "port-range-parity"
)

// Class is what a kernel message means. Only Name is always set; the other
// fields are filled when the message carries them.
type Class struct {
	// Name is one of the Class* constants, or "" for a message that names
	// no known fault.
	Name string
	// Port and Addr are the listening socket of a SYN flooding message.
	// Addr is empty for the old form that names only the port, and has
	// no brackets for IPv6 ("::").
	Port int
	Addr string
	// NetNS is the inode of the network namespace named by a conntrack
	// "table full in netns N" message (Linux 6.x).
	NetNS uint64
	// Suppressed is N in "N callbacks suppressed".
	Suppressed int
	// Family is the table a neighbour table overflow names: "ipv4"
	// (arp_cache) or "ipv6" (ndisc_cache).
	Family string
}

// pattern maps lower-cased substrings of a message to a class name. A
// message matches when it contains any of the substrings.
type pattern struct {
	name string
	any  []string
}

// patterns is checked in order, first match wins. The texts are the
// format strings of the kernel sources named in the comments, lower-cased.
var patterns = []pattern{
	// net/netfilter/nf_conntrack_expect.c: "expectation table full".
	{ClassConntrackExpectFull, []string{"expectation table full"}},
	// net/netfilter/nf_conntrack_core.c: "table full, dropping packet"
	// before 6.1, "table full in netns %u, dropping packet" since, both
	// after the "nf_conntrack: " prefix; "ip_conntrack:" on 2.6 kernels.
	{ClassConntrackTableFull, []string{"conntrack: table full"}},
	// net/ipv4/tcp_input.c tcp_syn_flood_action: "Possible SYN flooding on
	// port 10.77.0.2:80" since 4.x, "possible SYN flooding on port 80"
	// before.
	{ClassSYNFlooding, []string{"syn flooding on port"}},
	// net/ipv4/tcp_minisocks.c tcp_time_wait on older kernels; 6.x only
	// counts TcpExt.TCPTimeWaitOverflow.
	{ClassTimewaitOverflow, []string{"time wait bucket table overflow"}},
	// net/ipv4/tcp.c tcp_out_of_memory; "Out of socket memory" before 3.x.
	// A bare "out of memory" is the OOM killer and does not match.
	{ClassOutOfSocketMemory, []string{"consider tuning tcp_mem", "out of socket memory"}},
	// net/ipv4/tcp.c tcp_check_oom; "too many of orphaned" before 4.x.
	{ClassTooManyOrphans, []string{"too many orphaned sockets", "too many of orphaned sockets"}},
	// fs/file_table.c alloc_empty_file.
	{ClassFileMax, []string{"vfs: file-max limit"}},
	// net/core/neighbour.c neigh_alloc; "Neighbour table overflow." before 4.x.
	{ClassNeighbourTableOverflow, []string{"neighbor table overflow", "neighbour table overflow"}},
	// lib/ratelimit.c ___ratelimit: "%s: %d callbacks suppressed".
	{ClassRatelimitSuppressed, []string{" callbacks suppressed"}},
	// net/sched/sch_generic.c dev_watchdog.
	{ClassTxTimeout, []string{"netdev watchdog:"}},
	// Driver messages: "NIC Link is Down" (e1000e, igb, ixgbe), "Link is
	// Down" (phylib, r8169 and most others); see also linkDownSuffix.
	{ClassLinkDown, []string{"link is down"}},
	// mm/page_alloc.c warn_alloc.
	{ClassPageAllocFailure, []string{"page allocation failure"}},
	// net/ipv4/sysctl_net_ipv4.c ipv4_local_port_range.
	{ClassPortRangeParity, []string{"ip_local_port_range: prefer different parity"}},
}

// linkDownSuffix ends the link-down messages of drivers that do not say
// "Link is Down", such as mlx5 ("mlx5e_... Link down"). Only the end of the
// message is checked, so that "link down shift" and the like do not match.
const linkDownSuffix = " link down"

// Classify tells what a kernel message means, from its text alone. It
// returns a Class with an empty Name for messages it does not know.
func Classify(text string) Class {
	lower := strings.ToLower(text)
	var c Class
	for _, p := range patterns {
		if containsAny(lower, p.any) {
			c.Name = p.name
			break
		}
	}
	if c.Name == "" && strings.HasSuffix(strings.TrimRight(lower, " .\n"), linkDownSuffix) {
		c.Name = ClassLinkDown
	}
	switch c.Name {
	case ClassConntrackTableFull:
		c.NetNS, _ = strconv.ParseUint(wordAfter(lower, "in netns "), 10, 64)
	case ClassSYNFlooding:
		c.Addr, c.Port = parsePort(wordAfter(lower, "on port "))
	case ClassRatelimitSuppressed:
		c.Suppressed = suppressed(lower)
	case ClassNeighbourTableOverflow:
		// "neighbour: arp_cache: neighbor table overflow!"; the table's
		// name is its family's.
		switch {
		case strings.Contains(lower, "ndisc_cache"):
			c.Family = "ipv6"
		case strings.Contains(lower, "arp_cache"):
			c.Family = "ipv4"
		}
	case ClassTxTimeout:
		if !strings.Contains(lower, "timed out") {
			c.Name = ""
		}
	}
	return c
}

// containsAny reports whether s contains any of subs.
func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// wordAfter returns the run of non-space characters that follows the first
// occurrence of prefix in s, without a final '.' or ',', or "" if s does
// not contain prefix.
func wordAfter(s, prefix string) string {
	_, rest, ok := strings.Cut(s, prefix)
	if !ok {
		return ""
	}
	if i := strings.IndexAny(rest, " \t\n"); i >= 0 {
		rest = rest[:i]
	}
	return strings.TrimRight(rest, ".,")
}

// parsePort splits the socket of a SYN flooding message: "10.77.0.2:80",
// "[::]:80" or, in the old form, "80". It returns a zero port if the word
// is none of these.
func parsePort(word string) (addr string, port int) {
	if p, err := strconv.Atoi(word); err == nil {
		return "", p
	}
	host, ps, err := net.SplitHostPort(word)
	if err != nil {
		return "", 0
	}
	p, err := strconv.Atoi(ps)
	if err != nil {
		return "", 0
	}
	return host, p
}

// suppressed returns N from "prefix: N callbacks suppressed".
func suppressed(lower string) int {
	before, _, _ := strings.Cut(lower, " callbacks suppressed")
	if i := strings.LastIndexAny(before, " \t"); i >= 0 {
		before = before[i+1:]
	}
	n, _ := strconv.Atoi(before)
	return n
}
