package rules

import (
	"fmt"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/kmsg"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// TimewaitBucketOverflow: TIME_WAIT sockets were destroyed early: tcp_max_tw_buckets was reached.
const TimewaitBucketOverflow report.FindingID = "timewait-bucket-overflow"

var _ = define(Class{ID: TimewaitBucketOverflow,
	Tunables:   []Tunable{{Name: "net.ipv4.tcp_max_tw_buckets", Min: sizing.MinTWBuckets, Max: 1 << 24, Why: "the kernel's default with 4 GiB of memory to 16M sockets (~3 GiB)"}},
	Is:         TimeWaitFull,
	Meaning:    "the TIME_WAIT table hit `tcp_max_tw_buckets`; closing sockets skip TIME_WAIT",
	Active:     "`TcpExtTCPTimeWaitOverflow` rose or a \"time wait bucket table overflow\" kernel message (warning)",
	LatentWhen: "none (a small limit is `risky-sysctl`)",
	Seed:       "004",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´timewait´ (´timewait.go´). It needs two snapshots. It is **active, warning** when
´TcpExtTCPTimeWaitOverflow´ rose, or when there is a kernel message of class ´timewait-overflow´
(´TCP: time wait bucket table overflow´; kernels since 6.x only count). The evidence adds
´net.ipv4.tcp_max_tw_buckets = N´ and ´N sockets in TIME_WAIT at the end of the window´ (sockstat
´TCP.tw´). The fix is ´tcp_max_tw_buckets=262144´ and fewer short connections. A small limit without
overflows is reported as ´risky-sysctl´.`,
})

var _ = register(Rule{Name: "timewait", Order: 50, Scope: PerSide, IDs: []report.FindingID{TimewaitBucketOverflow}, Checks: "the TIME_WAIT table", Check: checkTimeWait,
	Watches: []string{"TcpExt.TCPTimeWaitOverflow"}})

// checkTimeWait finds TIME_WAIT sockets destroyed early because the table
// hit tcp_max_tw_buckets (seed 004). On 6.x only the counter records it;
// older kernels also log "time wait bucket table overflow".
func checkTimeWait(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	it, d := counterItem(w, "TcpExt.TCPTimeWaitOverflow")
	var items []report.Item
	if d > 0 {
		items = append(items, it)
	}
	for _, m := range b.Kmsg() {
		if m.Class == kmsg.ClassTimewaitOverflow {
			items = append(items, report.Item{Text: "kernel: " + m.Text, Source: "kmsg", Window: true})
			break
		}
	}
	if len(items) == 0 {
		return nil
	}
	last := &b.Snapshots[len(b.Snapshots)-1]
	if twMax, ok := SysctlInt(last, "net.ipv4.tcp_max_tw_buckets"); ok {
		items = append(items, settingItem("net.ipv4.tcp_max_tw_buckets", strconv.FormatInt(twMax, 10)))
	}
	if tw, ok := last.Sockstat["TCP.tw"]; ok {
		items = append(items, report.Item{Text: fmt.Sprintf("%d sockets in TIME_WAIT at the end of the window", tw), Source: "sockstat", Window: true})
	}
	want := "262144"
	return []report.Finding{{ID: TimewaitBucketOverflow, Severity: report.Warning, Status: report.Active,
		Title:    "TIME_WAIT table overflow: closing connections skip TIME_WAIT, losing protection against stray old segments",
		Evidence: items,
		Actions: append([]report.Action{sysctlFix(b, "net.ipv4.tcp_max_tw_buckets", want)}, report.Advise(
			"a small tcp_max_tw_buckets does not save memory worth having (40k TIME_WAIT < 10 MiB); the lasting fix is fewer short connections (keep-alive, connection pools)")),
	}}
}
