package tune

import (
	"fmt"
	"slices"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/neighbour.go: a full neighbour
// (ARP or NDP) table.

var _ = planFix(rules.NeighbourTableOverflow, rankRest, (*builder).neighbour)

// neighbour raises the three thresholds of each table that overflowed,
// host-wide, sized as the finding sizes them: four times the limit in
// force, in the kernel's ratios.
func (b *builder) neighbour(f report.Finding) error {
	for _, fam := range neighbourFamilies(f) {
		prefix := "net." + fam + ".neigh.default.gc_thresh"
		cur, ok := b.current(prefix + "3")
		if !ok {
			b.note(f, prefix+"3 could not be read here nor in the report: set it in the initial namespace")
			continue
		}
		t1, t2, t3 := sizing.Neighbour(atoi(cur))
		why := fmt.Sprintf("four times the %s entries the %s table could hold, at least 8192, with the kernel's ratios below it (an eighth, a half); ~%d MiB at most", cur, fam, t3*500>>20)
		for i, v := range []int{t1, t2, t3} {
			if err := b.sysctl(f, prefix+strconv.Itoa(i+1), strconv.Itoa(v), why); err != nil {
				return err
			}
		}
	}
	return nil
}

// neighbourFamilies are the tables the kernel said overflowed, as the
// finding's fix raises them (IPv4's when it raises neither).
func neighbourFamilies(f report.Finding) []string {
	raises := func(fam string) bool {
		return slices.ContainsFunc(f.Actions, func(a report.Action) bool {
			return a.Kind == report.ActionSysctl && a.Setting == "net."+fam+".neigh.default.gc_thresh3"
		})
	}
	var out []string
	if v4, v6 := raises("ipv4"), raises("ipv6"); v4 || !v6 {
		out = append(out, "ipv4")
	}
	if raises("ipv6") {
		out = append(out, "ipv6")
	}
	return out
}
