package tune

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/ports.go: connections that run
// out of local ports.

var _ = planFix(rules.EphemeralPortExhaustion, rankRest, (*builder).ports)

// ports sizes the ephemeral range from the connect rate times the time a
// port stays in TIME_WAIT (60 s; 1 s with tcp_tw_reuse on). When the
// server opens a connection per request, or its ports ran out, the rate
// is the requests it handled: a connect that found no port sent no SYN
// and counts in no kernel counter, as the rule sizes it.
func (b *builder) ports(f report.Finding) error {
	rate := b.rate("TcpActiveOpens")
	if l := b.in.Load; l != nil && (rate >= 0.5*l.RPS || f.Status == report.Active) {
		rate = max(rate, l.RPS)
	}
	reuse, _ := b.current("net.ipv4.tcp_tw_reuse")
	life := sizing.PortHold(reuse == "1")
	cur, _ := b.current("net.ipv4.ip_local_port_range")
	need, lo, hi, widen := sizing.Ports(rate, life, rangeWidth(cur))
	if !widen {
		b.satisfied(f, fmt.Sprintf("net.ipv4.ip_local_port_range (%s) already holds the %d ports a destination needs", cur, need))
		return nil
	}
	proposed := fmt.Sprintf("%d %d", lo, hi)
	why := fmt.Sprintf("%.0f connections/s × %.0f s in TIME_WAIT × 1.25 = %d ports needed per destination; the range gives %d (it had %d)", rate, life, need, hi+1-lo, rangeWidth(cur))
	if need > hi+1-lo {
		why += "; the range alone cannot hold them: keeping connections open (" + string(rules.UpstreamConnectionChurn) + ") is the fix, the range is headroom"
	}
	return b.sysctl(f, "net.ipv4.ip_local_port_range", proposed, why)
}
