package rules

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
)

const arpFull = "neighbour: arp_cache: neighbor table overflow!"

var _ = addTable("checkNeighbour", checkNeighbour, neighbourCases)

func neighbourCases() []ruleCase {
	return []ruleCase{
		{name: "healthy", bundle: bundle(nil, nil)},
		{
			name:   "arp cache full, thresholds readable",
			bundle: bundle(nil, all(kmsgs("neighbour-table-overflow", arpFull, arpFull), setSysctl("net.ipv4.neigh.default.gc_thresh3", "1024"))),
			want: []want{{ID: NeighbourTableOverflow, Status: report.Active, Severity: report.Critical,
				Evidence: []string{"kernel: " + arpFull, "2 such kernel messages", "net.ipv4.neigh.default.gc_thresh3 = 1024"}}},
		},
		{
			name:   "ndisc cache full in a namespace that cannot read the host's thresholds",
			bundle: bundle(nil, kmsgs("neighbour-table-overflow", "neighbour: ndisc_cache: neighbor table overflow!")),
			want: []want{{ID: NeighbourTableOverflow, Status: report.Active, Severity: report.Critical,
				Evidence: []string{"ndisc_cache"}}},
		},
		{
			name:   "another kernel message",
			bundle: bundle(nil, kmsgs("conntrack-table-full", "nf_conntrack: table full, dropping packet")),
		},
	}
}

func TestCheckNeighbour(t *testing.T) {
	runCases(t, "checkNeighbour", checkNeighbour, neighbourCases())
}

// TestNeighbourFix: the three thresholds of the family that overflowed,
// host-wide, four times the limit in force and in the kernel's ratios.
func TestNeighbourFix(t *testing.T) {
	b := inNetNS(bundle(nil, all(kmsgs("neighbour-table-overflow", arpFull), setSysctl("net.ipv4.neigh.default.gc_thresh3", "4096"))), "pods")
	f := checkNeighbour(on(b))[0]
	for _, want := range []string{"sysctl -w net.ipv4.neigh.default.gc_thresh1=2048", "sysctl -w net.ipv4.neigh.default.gc_thresh2=8192",
		"sysctl -w net.ipv4.neigh.default.gc_thresh3=16384", "why 16384: four times the 4096 entries"} {
		if !hasFix(f, want) {
			t.Errorf("fix lacks %q: %q", want, fixOf(f))
		}
	}
	if hasFix(f, "ip netns exec") || hasFix(f, "net.ipv6") {
		t.Errorf("host-wide IPv4 settings only, without a namespace prefix: %q", fixOf(f))
	}
}
