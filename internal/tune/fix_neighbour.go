package tune

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/neighbour.go: a full neighbour
// (ARP or NDP) table.

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

// neighbourFamilies are the tables the kernel said overflowed: arp_cache
// is IPv4's, ndisc_cache IPv6's.
func neighbourFamilies(f report.Finding) []string {
	var v4, v6 bool
	for _, e := range f.Evidence {
		if e.Source == "kmsg" {
			v6 = v6 || strings.Contains(e.Text, "ndisc_cache")
			v4 = v4 || strings.Contains(e.Text, "arp_cache")
		}
	}
	var out []string
	if v4 || !v6 {
		out = append(out, "ipv4")
	}
	if v6 {
		out = append(out, "ipv6")
	}
	return out
}
