package rules

import (
	"fmt"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// NeighbourTableOverflow: the neighbour (ARP or NDP) table is full, and
// packets to next hops it cannot add are dropped.
const NeighbourTableOverflow report.FindingID = "neighbour-table-overflow"

var _ = define(Class{ID: NeighbourTableOverflow,
	Tunables: []Tunable{
		{Name: "net.ipv4.neigh.default.gc_thresh1", Min: 1 << 10, Max: 1 << 17, Why: "an eighth of gc_thresh3"},
		{Name: "net.ipv4.neigh.default.gc_thresh2", Min: 1 << 12, Max: 1 << 19, Why: "half of gc_thresh3"},
		{Name: "net.ipv4.neigh.default.gc_thresh3", Min: 1 << 13, Max: 1 << 20, Why: "sizing.Neighbour's floor to 1M entries (~500 MiB)"},
		{Name: "net.ipv6.neigh.default.gc_thresh1", Min: 1 << 10, Max: 1 << 17, Why: "an eighth of gc_thresh3"},
		{Name: "net.ipv6.neigh.default.gc_thresh2", Min: 1 << 12, Max: 1 << 19, Why: "half of gc_thresh3"},
		{Name: "net.ipv6.neigh.default.gc_thresh3", Min: 1 << 13, Max: 1 << 20, Why: "sizing.Neighbour's floor to 1M entries (~500 MiB)"},
	},
	Critical: true,
	Errors:   true, Delays: true,
	Meaning:    "the neighbour (ARP/NDP) table is full; packets to next hops it cannot add are dropped",
	Active:     "a \"neighbor table overflow\" kernel message (critical)",
	LatentWhen: "none",
	Seed:       "— (many peers on one segment: nodes with many pods)",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´neighbour´ (´neighbour.go´, ´checkNeighbour´). The kernel keeps one neighbour entry per next
hop on a directly connected network; past ´gc_thresh3´ it refuses new ones, logs ´neighbour:
arp_cache: neighbor table overflow!´ (´ndisc_cache´ for IPv6) and drops the packets it cannot
resolve. **Active, critical** when such a kernel message was written in the window. The table and
its thresholds are the host's (´net.ipv4.neigh.default.gc_thresh1/2/3´ exist in the initial
namespace only), so the message counts in any namespace, and the evidence adds ´gc_thresh3´ where it
can be read. The fix (´tune/fix_neighbour.go´ plans the same) sets the three thresholds of the family
that overflowed to four times the limit in force (at least 8192, a power of two) with the kernel's
own ratios below it: an eighth and a half. This rule is the worked example of
[architecture.md](architecture.md#adding-a-rule-and-its-fix).`,
})

var _ = register(Rule{Name: "neighbour", Order: 160, Scope: PerSide, IDs: []report.FindingID{NeighbourTableOverflow}, Checks: "the neighbour table", Check: checkNeighbour})

// checkNeighbour finds a full neighbour table. The kernel keeps one entry
// per next hop on a directly connected network; past gc_thresh3 it
// refuses new ones, logs "neighbor table overflow!" and drops what it
// cannot resolve: a host talking to thousands of peers on one segment (a
// node with many pods, a flat /16) loses packets to some of them. The
// table and its thresholds are the host's, so the message counts in any
// namespace.
func checkNeighbour(in *Input) []report.Finding {
	b := in.Bundle
	var items []report.Item
	families := map[string]bool{}
	n := 0
	for _, m := range b.Kmsg() {
		if m.Class != kmsg.ClassNeighbourTableOverflow {
			continue
		}
		if n++; n == 1 {
			items = append(items, report.Item{Text: "kernel: " + m.Text, Source: "kmsg", Window: true})
		}
		// arp_cache is IPv4's table, ndisc_cache IPv6's; a message
		// whose table the kernel log did not name is taken as IPv4's.
		fam := m.Family
		if fam == "" {
			fam = "ipv4"
		}
		families[fam] = true
	}
	if n == 0 {
		return nil
	}
	if n > 1 {
		items = append(items, report.Item{Text: fmt.Sprintf("%d such kernel messages in the window", n), Source: "kmsg", Window: true})
	}
	last := &b.Snapshots[len(b.Snapshots)-1]
	var fix []report.Action
	for _, fam := range []string{"ipv4", "ipv6"} {
		if !families[fam] {
			continue
		}
		prefix := "net." + fam + ".neigh.default.gc_thresh"
		cur, ok := SysctlInt(last, prefix+"3")
		if !ok {
			cur = 1024 // the kernel's default; a namespace cannot read the host's
		} else {
			items = append(items, settingItem(prefix+"3", strconv.FormatInt(cur, 10)))
		}
		t1, t2, t3 := sizing.Neighbour(int(cur))
		for i, v := range []int{t1, t2, t3} {
			fix = append(fix, sysctlFix(b, prefix+strconv.Itoa(i+1), strconv.Itoa(v)))
		}
		fix = append(fix, report.Advise(fmt.Sprintf("why %d: four times the %d entries the table could hold, at least 8192, with the kernel's ratios below it (an eighth, a half); each entry is about 500 bytes", t3, cur)))
	}
	fix = append(fix, notes("the thresholds are the host's: set them in the initial namespace (a container's node)",
		"fewer next hops on one segment also helps: route through a gateway instead of a flat network with thousands of neighbours")...)
	return []report.Finding{{ID: NeighbourTableOverflow, Severity: report.Critical, Status: report.Active,
		Title:    "The neighbour (ARP/NDP) table is full: packets to new next hops are dropped",
		Evidence: items, Actions: fix}}
}
