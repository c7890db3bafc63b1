package tune

import "testing"

// TestCheckAdvice: Check refuses each outdated proposal of the advice
// table and lets its correction through; checkPlan refuses
// nf_conntrack_max past the hash without the hash.
func TestCheckAdvice(t *testing.T) {
	for _, c := range []struct {
		name, cur, proposed string
		bad                 bool
	}{
		{"net.ipv4.tcp_tw_recycle", "0", "1", true},
		{"net.ipv4.tcp_max_tw_buckets", "262144", "5000", true},
		{"net.ipv4.tcp_max_tw_buckets", "5000", "262144", false},
		{"net.ipv4.tcp_fin_timeout", "60", "10", true},
		{"net.netfilter.nf_conntrack_tcp_timeout_time_wait", "120", "30", true},
		{"net.ipv4.tcp_abort_on_overflow", "0", "1", true},
		{"net.ipv4.tcp_abort_on_overflow", "1", "0", false},
		{"net.ipv4.tcp_max_syn_backlog", "512", "65535", true},
		{"net.ipv4.tcp_low_latency", "0", "1", true},
		{"net.ipv4.tcp_timestamps", "1", "0", true},
		{"net.ipv4.tcp_timestamps", "0", "1", false},
		{"net.ipv4.tcp_tw_reuse", "2", "1", false},
		{"net.core.somaxconn", "4096", "128", true},
		{"net.core.somaxconn", "10", "4096", false},
	} {
		err := Check(Change{Kind: KindSysctl, Sysctl: &Sysctl{Name: c.name, Current: c.cur, Proposed: c.proposed}})
		if (err != nil) != c.bad {
			t.Errorf("%s %s → %s: %v, want refused %v", c.name, c.cur, c.proposed, err, c.bad)
		}
	}
	p := &Plan{Changes: []Change{{Kind: KindSysctl, Sysctl: &Sysctl{Name: "net.netfilter.nf_conntrack_max", Current: "65536", Proposed: "1048576"}}}}
	if err := checkPlan(p, func() int { return 262144 }); err == nil {
		t.Error("nf_conntrack_max past the buckets without them: accepted")
	}
	p.Changes = append(p.Changes, Change{Kind: KindSysctl, Sysctl: &Sysctl{Name: "net.netfilter.nf_conntrack_buckets", Current: "262144", Proposed: "1048576"}})
	if err := checkPlan(p, func() int { return 262144 }); err != nil {
		t.Error(err)
	}
}
