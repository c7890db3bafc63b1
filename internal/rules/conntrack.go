package rules

import (
	"fmt"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// ConntrackTableFull: the connection-tracking table dropped new flows, or is close to it.
const ConntrackTableFull report.FindingID = "conntrack-table-full"

var _ = define(Class{ID: ConntrackTableFull,
	Tunables: []Tunable{
		{Name: "net.netfilter.nf_conntrack_max", Min: sizing.MinConntrackMax, Max: 1 << 24, Why: "sizing.Conntrack's floor to 16M entries (~5 GiB at ~320 B)"},
		{Name: "net.netfilter.nf_conntrack_buckets", Min: sizing.MinConntrackMax, Max: 1 << 24, Why: "as nf_conntrack_max, which it follows"},
	},
	Resource: "conntrack",
	Critical: true, Latent: true,
	Errors: true, Delays: true, Latency: true, Drops: true, Fails: FailsConnections,
	Meaning:    "the netfilter connection-tracking table is full and new flows are dropped",
	Active:     "conntrack `drop`, `early_drop` or `insert_failed` rose, or a \"table full\" kernel message (critical)",
	LatentWhen: "peak `nf_conntrack_count` ≥ 80 % of `nf_conntrack_max` (warning)",
	Seed:       "000 stage 1, 002, 001 §8",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´conntrack´ (´conntrack.go´). It needs conntrack data with ´nf_conntrack_max´ > 0 in the last
snapshot.

- **Active, critical** when any of these holds:
  - the per-CPU sums of ´drop´, ´early_drop´ or ´insert_failed´ from ´/proc/net/stat/nf_conntrack´ rose
    between the first and last snapshot (´nf_conntrack drop +175 in 1s´);
  - there is a kernel message of class ´conntrack-table-full´ (´nf_conntrack: table full, dropping
    packet´, or ´… table full in netns N, dropping packet´ since 6.1). A message that names another
    namespace's inode than the bundle's ´host.netns_inode´ is ignored. If either inode is unknown, the
    message is kept. Messages count with one snapshot too.

  The first message is quoted, and ´N 'table full' kernel messages in the window´ is added when there
  is more than one.
- **Latent, warning** when the peak ´nf_conntrack_count´ over all snapshots is at least 80 % of the last
  ´nf_conntrack_max´.
- Both carry the level: ´nf_conntrack_count peaked at 200 of nf_conntrack_max 200 (100%), 1024 hash
  buckets´.
- Fix: a new ´nf_conntrack_max´ sized as ´tune plan´ sizes it: the connections opened and accepted per
  second × ´nf_conntrack_tcp_timeout_time_wait´ × 1.25, or twice the peak (the maximum when the table
  dropped), a power of two, never below the hash's buckets nor 65536; the matching ´hashsize´, and
  NOTRACK for high-rate stateless traffic. The rule counts every connection; the plan counts a
  local-to-local connection once and none that its own keepalive change keeps open, so it may propose
  less, and the fix says so. ´nf_conntrack_max´ is global; in a namespace the fix says so.`,
})

var _ = register(Rule{Name: "conntrack", Order: 20, Scope: PerSide, IDs: []report.FindingID{ConntrackTableFull}, Checks: "connection tracking", Check: checkConntrack})

// checkConntrack finds a connection-tracking table that drops new flows
// (seed 000 stage 1, seed 002) or is close to doing so.
func checkConntrack(in *Input) []report.Finding {
	b := in.Bundle
	last := &b.Snapshots[len(b.Snapshots)-1]
	ct := last.Conntrack
	if ct == nil || ct.Max == 0 {
		return nil
	}
	peak := ct.Count
	for _, s := range b.Snapshots {
		if s.Conntrack != nil && s.Conntrack.Count > peak {
			peak = s.Conntrack.Count
		}
	}
	var items []report.Item
	w, ok := b.Window()
	if ok {
		for _, st := range []string{"drop", "early_drop", "insert_failed"} {
			if d := w.ConntrackStat(st); d > 0 {
				items = append(items, report.Item{Text: fmt.Sprintf("nf_conntrack %s +%d in %s", st, d, round(w)), Source: "conntrack." + st, Window: true})
			}
		}
	}
	var msgs int
	for _, m := range b.Kmsg() {
		if m.Class == kmsg.ClassConntrackTableFull && (m.NetNS == 0 || b.Host.NetNSInode == 0 || m.NetNS == b.Host.NetNSInode) {
			if msgs == 0 {
				items = append(items, report.Item{Text: "kernel: " + m.Text, Source: "kmsg", Window: true})
			}
			msgs++
		}
	}
	if msgs > 1 {
		items = append(items, report.Item{Text: fmt.Sprintf("%d 'table full' kernel messages in the window", msgs), Source: "kmsg", Window: true})
	}
	fill := float64(peak) / float64(ct.Max)
	level := report.Item{Text: fmt.Sprintf("nf_conntrack_count peaked at %d of nf_conntrack_max %d (%.0f%%), %d hash buckets", peak, ct.Max, 100*fill, ct.Buckets), Source: "conntrack"}
	switch {
	case len(items) > 0:
		level.Window = true
		f := report.Finding{ID: ConntrackTableFull, Severity: report.Critical, Status: report.Active,
			Title:    "Connection tracking table full: new connections are dropped",
			Evidence: append(items, level), Actions: conntrackFix(b, ct, max(peak, ct.Max))}
		return []report.Finding{f}
	case fill >= 0.8:
		return []report.Finding{{ID: ConntrackTableFull, Severity: report.Warning, Status: report.Latent,
			Title:    fmt.Sprintf("Connection tracking table %.0f%% full: it will drop new connections when it fills", 100*fill),
			Evidence: []report.Item{level}, Actions: conntrackFix(b, ct, peak)}}
	}
	return nil
}

// conntrackFix sizes the table as tune plan does, from the connections
// the window saw opened and accepted (tune's plan may count fewer: those
// to local upstreams it keeps open) and the most entries seen.
func conntrackFix(b *evidence.Bundle, ct *evidence.Conntrack, peak uint64) []report.Action {
	rate := 0.0
	if w, ok := b.Window(); ok {
		rate = w.Rate("Tcp.ActiveOpens") + w.Rate("Tcp.PassiveOpens")
	}
	tw := float64(sizing.ConntrackTimeWait)
	if v, ok := SysctlInt(&b.Snapshots[len(b.Snapshots)-1], "net.netfilter.nf_conntrack_tcp_timeout_time_wait"); ok && v > 0 {
		tw = float64(v)
	}
	want, need := sizing.Conntrack(rate, tw, peak, ct.Buckets)
	v := strconv.FormatUint(want, 10)
	fix := append([]report.Action{
		sysctlFix(b, "net.netfilter.nf_conntrack_max", v).Because("global: set it in the initial namespace"),
		report.Command("echo "+v+" > /sys/module/nf_conntrack/parameters/hashsize", "grow the hash with the table, or chains get long"),
	}, notes(
		"for high-rate stateless traffic, skip tracking: nft add rule inet raw prerouting tcp dport <port> notrack (and the output direction)",
		"entries in TIME_WAIT last net.netfilter.nf_conntrack_tcp_timeout_time_wait (120 s); reusing connections cuts their number",
	)...)
	seen := fmt.Sprintf("%d seen", peak)
	if peak >= ct.Max {
		seen += " (the table was full)"
	}
	fix = append(fix, report.Advise(fmt.Sprintf("why %s: %.0f new connections/s × %.0f s in TIME_WAIT × %.2f = %d entries, twice the %s, whichever is more, rounded up to a power of two; at least the hash's %d buckets and %d. This counts every connection opened and accepted; `netdoctor tune plan` counts one entry for a connection between two local sockets and none for upstream connections its plan keeps open, so it may propose less",
		v, rate, tw, sizing.Margin, need, seen, ct.Buckets, sizing.MinConntrackMax)))
	if b.Host.NetNS != "" {
		fix = append(fix, report.Advise("note: nf_conntrack_max is shared by every namespace and read-only inside "+b.Host.NetNS))
	}
	return fix
}
