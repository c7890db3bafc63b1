package tune

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/conntrack.go: a connection
// tracking table too small for the connections that pass through it.

var _ = planFix(rules.ConntrackTableFull, rankRest, (*builder).conntrack)

// conntrack sizes the table from the connections that pass through it:
// every new connection lives there for its TIME_WAIT timeout after it
// closes. Never below the hash table's size, which is what the kernel
// itself sets the maximum to (since 5.15); the hash grows with it so
// that chains stay short (advice.md #9).
func (b *builder) conntrack(f report.Finding) error {
	ct := b.in.Summary.Conntrack
	if ct == nil {
		b.note(f, "the report has no conntrack numbers")
		return nil
	}
	tw := float64(sizing.ConntrackTimeWait)
	if v, ok := b.current("net.netfilter.nf_conntrack_tcp_timeout_time_wait"); ok && atoi(v) > 0 {
		tw = float64(atoi(v))
	}
	rate, flows := b.flows()
	peak := ct.Count
	if f.Status == report.Active {
		peak = max(peak, ct.Max) // the table was full
	}
	buckets := ct.Buckets
	if v, ok := b.current("net.netfilter.nf_conntrack_buckets"); ok && atoi(v) > 0 {
		buckets = uint64(atoi(v))
	}
	want, need := sizing.Conntrack(rate, tw, peak, buckets)
	why := fmt.Sprintf("%.0f new connections/s (%s) × %.0f s (nf_conntrack_tcp_timeout_time_wait) × 1.25 = %d entries; the table was full at %d; never below the hash's %d buckets, which is the kernel's own default maximum: %d (~%d MiB at ~320 B an entry)",
		rate, flows, tw, need, peak, buckets, want, want*320>>20)
	if err := b.sysctl(f, "net.netfilter.nf_conntrack_max", strconv.FormatUint(want, 10), why); err != nil {
		return err
	}
	if want > buckets {
		return b.sysctl(f, "net.netfilter.nf_conntrack_buckets", strconv.FormatUint(want, 10),
			"the hash grows with the maximum (one entry per bucket, as the kernel sizes it), or chains get long and inserts are refused (advice.md #9)")
	}
	return nil
}

// flows estimates the connections a second that conntrack will see: the
// passive and active opens, a connection between two local sockets
// counted once (conntrack has one entry for it, TCP an open at each
// end), and without those to upstreams the plan keeps open.
func (b *builder) flows() (float64, string) {
	active, passive := b.rate("TcpActiveOpens"), b.rate("TcpPassiveOpens")
	local, kept := true, true
	n := 0
	for _, s := range b.in.Servers {
		for _, u := range s.Upstreams {
			n++
			if !strings.HasPrefix(u, loopbackPrefix) && !strings.HasPrefix(u, "unix:") {
				local = false
			}
			if b.keep[u] == 0 {
				kept = false
			}
		}
	}
	if n == 0 {
		return active + passive, fmt.Sprintf("%.0f/s accepted + %.0f/s opened", passive, active)
	}
	switch {
	case local && kept:
		return max(passive-active, 0), fmt.Sprintf("%.0f/s accepted, less the %.0f/s to local upstreams that the plan keeps open", passive, active)
	case local:
		return max(passive, active), fmt.Sprintf("%.0f/s accepted, of which %.0f/s from this host to its local upstreams (one entry each)", passive, active)
	case kept:
		return passive, fmt.Sprintf("%.0f/s accepted; the %.0f/s opened to upstreams will be kept open by the plan", passive, active)
	}
	return active + passive, fmt.Sprintf("%.0f/s accepted + %.0f/s opened", passive, active)
}
