package rules

import (
	"fmt"
	"strings"

	"github.com/netdoctor/netdoctor/internal/report"
)

// RiskySysctl: a setting copied from old advice hurts.
const RiskySysctl report.FindingID = "risky-sysctl"

var _ = define(Class{ID: RiskySysctl,
	Tunables: []Tunable{
		{Name: "net.ipv4.tcp_abort_on_overflow", Values: []string{"0"}, Why: "the advice table's value"},
		{Name: "net.ipv4.tcp_timestamps", Values: []string{"1"}, Why: "the advice table's value"},
		{Name: "net.ipv4.tcp_tw_recycle", Values: []string{"0"}, Why: "the advice table's value"},
		{Name: "net.ipv4.tcp_low_latency", Values: []string{"0"}, Why: "the advice table's value"},
		{Name: "net.ipv4.tcp_moderate_rcvbuf", Values: []string{"1"}, Why: "the advice table's value"},
		// The advice table proposes the default 7200 when it is below 60,
		// which it calls harmful; nothing else.
		{Name: "net.ipv4.tcp_keepalive_time", Values: []string{"7200"}, Why: "the kernel's default, which the advice table restores when the setting is below 60"},
	},
	Latent:     true,
	Meaning:    "a setting that copy-paste tuning guides recommend and that hurts on current kernels",
	Active:     "none",
	LatentWhen: "one finding per risky setting (warning)",
	Seed:       "004, and the team's notes on outdated tuning advice",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´sysctl´ (´sysctl.go´). It reads the last snapshot. There is one **latent, warning** finding per
setting, with the setting as subject. The evidence is the value and why it hurts; the fix is the value
to use instead. Settings the kernel does not have (´tcp_tw_recycle´ since 4.12) are skipped.

| setting | flagged when | use instead | why |
|---|---|---|---|
| ´net.ipv4.tcp_tw_recycle´ | ≠ 0 | 0 | drops SYNs from clients behind NAT; removed in 4.12 |
| ´net.ipv4.tcp_max_tw_buckets´ | < 10000 | 262144 | over the limit sockets skip TIME_WAIT (´TCPTimeWaitOverflow´) |
| ´net.ipv4.tcp_abort_on_overflow´ | ≠ 0 | 0 | a full accept queue becomes resets to clients |
| ´net.ipv4.tcp_timestamps´ | = 0 | 1 | disables PAWS and makes ´tcp_tw_reuse´ a no-op |
| ´net.ipv4.tcp_syncookies´ | = 0 | 1 | a full SYN queue drops requests instead of answering with cookies |
| ´net.core.netdev_max_backlog´ | < 300 | 1000 | a tiny per-CPU backlog drops packets under any burst |
| ´net.ipv4.tcp_keepalive_time´ | < 60 | 7200 | probes every idle connection within seconds |
| ´net.ipv4.tcp_moderate_rcvbuf´ | = 0 | 1 | disables receive-buffer autotuning |
| ´net.ipv4.tcp_low_latency´ | ≠ 0 | 0 | no effect since 4.14 |
| ´net.core.somaxconn´ | < 128 | 4096 | caps every listener's accept queue |`,
})

var _ = register(Rule{Name: "sysctl", Order: 100, Scope: PerSide, IDs: []report.FindingID{RiskySysctl}, Checks: "risky settings", Check: checkSysctls})

// risky is one setting that copy-paste tuning guides recommend and that
// hurts on current kernels (docs/advice.md).
type risky struct {
	name  string
	bad   func(v int64) bool
	why   string
	value string // what to set instead
}

var riskySettings = []risky{
	{"net.ipv4.tcp_tw_recycle", func(v int64) bool { return v != 0 },
		"drops SYNs from clients behind NAT; broken since 4.10 and removed in 4.12", "0"},
	{"net.ipv4.tcp_max_tw_buckets", func(v int64) bool { return v < 10000 },
		"over the limit the kernel destroys sockets instead of keeping TIME_WAIT (TCPTimeWaitOverflow); TIME_WAIT costs about 200 bytes each", "262144"},
	{"net.ipv4.tcp_abort_on_overflow", func(v int64) bool { return v != 0 },
		"turns a full accept queue into resets sent to clients, hiding the capacity problem instead of absorbing bursts", "0"},
	{"net.ipv4.tcp_timestamps", func(v int64) bool { return v == 0 },
		"disables PAWS and makes tcp_tw_reuse a no-op; RTT estimates get worse", "1"},
	{"net.ipv4.tcp_syncookies", func(v int64) bool { return v == 0 },
		"a full SYN queue then drops connection requests instead of answering with cookies", "1"},
	{"net.core.netdev_max_backlog", func(v int64) bool { return v < 300 },
		"a tiny per-CPU input backlog drops received packets under any burst", "1000"},
	{"net.ipv4.tcp_keepalive_time", func(v int64) bool { return v < 60 },
		"probes every idle connection within seconds, waking peers and middleboxes for nothing", "7200"},
	{"net.ipv4.tcp_moderate_rcvbuf", func(v int64) bool { return v == 0 },
		"disables receive-buffer autotuning: connections keep a fixed window", "1"},
	{"net.ipv4.tcp_low_latency", func(v int64) bool { return v != 0 },
		"has had no effect since 4.14; latency comes from TCP_NODELAY in the application or busy polling", "0"},
	{"net.core.somaxconn", func(v int64) bool { return v < 128 },
		"caps every listener's accept queue, whatever backlog the application asks for (default 4096 since 5.4)", "4096"},
}

// Risky returns, for a setting the advice table knows, whether value v
// hurts, the value to set instead and why.
func Risky(name string, v int64) (bad bool, value, why string, known bool) {
	for _, r := range riskySettings {
		if r.name == name {
			return r.bad(v), r.value, r.why, true
		}
	}
	return false, "", "", false
}

// checkSysctls flags settings known to hurt, whatever the load.
func checkSysctls(in *Input) []report.Finding {
	b := in.Bundle
	last := &b.Snapshots[len(b.Snapshots)-1]
	var out []report.Finding
	for _, r := range riskySettings {
		v, ok := SysctlInt(last, r.name)
		if !ok || !r.bad(v) {
			continue
		}
		out = append(out, report.Finding{ID: RiskySysctl, Severity: report.Warning, Status: report.Latent, Subject: r.name, About: report.About{Setting: r.name},
			Title:    fmt.Sprintf("%s = %d: %s", r.name, v, strings.SplitN(r.why, ";", 2)[0]),
			Evidence: []report.Item{settingItem(r.name, fmt.Sprint(v)), {Text: "why: " + r.why, Source: "advice"}},
			Actions:  []report.Action{sysctlFix(b, r.name, r.value)},
		})
	}
	return out
}
