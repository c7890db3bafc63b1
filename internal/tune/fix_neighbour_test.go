package tune

import (
	"strconv"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// neighbourFinding is the finding of rules/neighbour.go for a table:
// its fix raises the thresholds of that family.
func neighbourFinding(table string) report.Finding {
	fam := map[string]string{"arp_cache": "ipv4", "ndisc_cache": "ipv6"}[table]
	f := report.Finding{ID: rules.NeighbourTableOverflow, Severity: report.Critical, Status: report.Active,
		Evidence: []report.Item{{Text: "kernel: neighbour: " + table + ": neighbor table overflow!", Source: "kmsg", Window: true}}}
	for i, v := range []string{"1024", "4096", "8192"} {
		f.Actions = append(f.Actions, report.SetSysctl("net."+fam+".neigh.default.gc_thresh"+strconv.Itoa(i+1), v, "", true))
	}
	return f
}

// TestNeighbour: the IPv4 table overflowed at the host's 1024 entries:
// the three thresholds go to 1024, 4096 and 8192 (four times the limit,
// in the kernel's ratios), host-wide whatever namespace the report came
// from; the IPv6 ones are left alone.
func TestNeighbour(t *testing.T) {
	h := seed000Host()
	h.sysctls["host net.ipv4.neigh.default.gc_thresh1"] = "128"
	h.sysctls["host net.ipv4.neigh.default.gc_thresh2"] = "512"
	h.sysctls["host net.ipv4.neigh.default.gc_thresh3"] = "1024"
	in := readSeed000(t)
	in.Findings = []report.Finding{neighbourFinding("arp_cache")}
	p := build(t, in, h)
	for n, want := range map[string]string{"1": "1024", "2": "4096", "3": "8192"} {
		s := sysctlChange(t, p, "net.ipv4.neigh.default.gc_thresh"+n)
		if s.Proposed != want || !s.Global {
			t.Errorf("gc_thresh%s → %s (global %v), want %s host-wide", n, s.Proposed, s.Global, want)
		}
	}
	if strings.Contains(titles(p), "ipv6") {
		t.Errorf("IPv6 thresholds changed for an IPv4 overflow: %s", titles(p))
	}
	if len(p.Changes) != 3 {
		t.Errorf("%d changes: %s", len(p.Changes), titles(p))
	}
}

// TestNeighbourUnreadable: thresholds nobody can read are not guessed.
func TestNeighbourUnreadable(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{neighbourFinding("ndisc_cache")}
	p := build(t, in, seed000Host())
	if len(p.Changes) != 0 || !strings.Contains(notes(p), "net.ipv6.neigh.default.gc_thresh3 could not be read") {
		t.Errorf("changes %s, notes %q", titles(p), notes(p))
	}
}
