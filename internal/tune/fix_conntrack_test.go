package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestConntrackKept: nginx's 984 connections/s to php-fpm are the ones
// the plan keeps open, even with conntrack's finding listed before the
// churn's: 15 new connections/s × 120 s × 1.25 fit in the hash's 262144
// buckets, which the maximum rises to, and the buckets stay.
func TestConntrackKept(t *testing.T) {
	in := pick(t, readSeed000(t), rules.ConntrackTableFull, rules.UpstreamConnectionChurn)
	p := build(t, in, seed000Host())
	c := change(p, "sysctl:net.netfilter.nf_conntrack_max@")
	if c == nil || c.Sysctl.Proposed != "262144" || !c.Sysctl.Global {
		t.Fatalf("nf_conntrack_max: %s, want 262144 host-wide", titles(p))
	}
	if why := strings.Join(c.Why, "\n"); !strings.HasPrefix(why, "15 new connections/s (999/s accepted, less the 984/s to local upstreams that the plan keeps open) × 120 s") {
		t.Errorf("the maximum does not discount the kept connections: %s", why)
	}
	if c := change(p, "sysctl:net.netfilter.nf_conntrack_buckets"); c != nil {
		t.Errorf("buckets raised though the maximum stays within them: %s", c.Title())
	}
}

// TestConntrackBuckets: without connections kept, the 999 connections/s
// accepted need 149835 entries, 262144 as a power of two, more than a
// hash of 65536 buckets: the buckets grow with the maximum.
func TestConntrackBuckets(t *testing.T) {
	h := seed000Host()
	h.sysctls["host net.netfilter.nf_conntrack_buckets"] = "65536"
	p := build(t, pick(t, readSeed000(t), rules.ConntrackTableFull), h)
	for _, name := range []string{"net.netfilter.nf_conntrack_max", "net.netfilter.nf_conntrack_buckets"} {
		if s := sysctlChange(t, p, name); s.Proposed != "262144" {
			t.Errorf("%s → %s, want 262144", name, s.Proposed)
		}
	}
	c := change(p, "sysctl:net.netfilter.nf_conntrack_max@")
	want := "999 new connections/s (999/s accepted, of which 984/s from this host to its local upstreams (one entry each)) × 120 s (nf_conntrack_tcp_timeout_time_wait) × 1.25 = 149835 entries"
	if why := strings.Join(c.Why, "\n"); !strings.HasPrefix(why, want) {
		t.Errorf("why %q, want it to start %q", why, want)
	}
}

// TestConntrackNoNumbers: a report without conntrack's numbers sizes
// nothing.
func TestConntrackNoNumbers(t *testing.T) {
	in := pick(t, readSeed000(t), rules.ConntrackTableFull)
	in.Summary.Conntrack = nil
	p := build(t, in, seed000Host())
	if len(p.Changes) != 0 || notes(p) != "conntrack-table-full: the report has no conntrack numbers" {
		t.Errorf("no numbers: %s", titles(p))
	}
}
