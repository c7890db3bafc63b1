package tune

import (
	"fmt"
)

// Check refuses a change the advice table (docs/advice.md)
// marks outdated or harmful: its left column, whatever a finding says.
func Check(c Change) error {
	s := c.Sysctl
	if s == nil {
		return nil
	}
	bad := func(row int, why string) error {
		return fmt.Errorf("%s = %s is advice.md #%d: %s", s.Name, s.Proposed, row, why)
	}
	switch s.Name {
	case "net.ipv4.tcp_tw_recycle":
		return bad(1, "removed in 4.12; it dropped SYNs from clients behind NAT")
	case "net.ipv4.tcp_max_tw_buckets":
		if !larger(s.Proposed, s.Current) {
			return bad(3, "lowering it destroys sockets instead of keeping TIME_WAIT")
		}
	case "net.ipv4.tcp_fin_timeout":
		return bad(4, "it times FIN_WAIT_2, not TIME_WAIT")
	case "net.netfilter.nf_conntrack_tcp_timeout_time_wait":
		return bad(5, "conntrack timers do not change TCP's TIME_WAIT")
	case "net.ipv4.tcp_abort_on_overflow":
		if s.Proposed != "0" {
			return bad(8, "resets clients instead of absorbing a burst")
		}
	case "net.ipv4.tcp_max_syn_backlog":
		return bad(7, "the accept queue is the listen backlog; the SYN queue limit matters only with syncookies off, which is fixed by turning them on")
	case "net.ipv4.tcp_low_latency":
		if s.Proposed != "0" {
			return bad(12, "no effect since 4.14")
		}
	case "net.ipv4.tcp_timestamps":
		if s.Proposed == "0" {
			return bad(13, "breaks PAWS and tcp_tw_reuse")
		}
	case "net.ipv4.tcp_tw_reuse":
		if s.Proposed != "1" && s.Proposed != "2" {
			return bad(2, "only 1 (outgoing connections) or the default 2")
		}
	case "net.core.somaxconn":
		if !larger(s.Proposed, s.Current) {
			return bad(6, "never lower the cap of every listener")
		}
	}
	return nil
}

// checkPlan applies Check across a plan, and the one rule that spans two
// changes: nf_conntrack_max is not raised past the hash's buckets
// without the buckets (advice.md #9).
func checkPlan(p *Plan, buckets func() int) error {
	var max, newBuckets int
	for _, c := range p.Changes {
		if err := Check(c); err != nil {
			return err
		}
		if s := c.Sysctl; s != nil {
			switch s.Name {
			case "net.netfilter.nf_conntrack_max":
				max = atoi(s.Proposed)
			case "net.netfilter.nf_conntrack_buckets":
				newBuckets = atoi(s.Proposed)
			}
		}
	}
	if bk := buckets(); max > 0 && bk > 0 && max > bk && max > newBuckets {
		return fmt.Errorf("nf_conntrack_max %d past the hash's %d buckets without raising them is advice.md #9", max, bk)
	}
	return nil
}
