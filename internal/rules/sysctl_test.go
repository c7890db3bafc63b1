package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

var _ = addTable("checkSysctls", checkSysctls, sysctlCases)

func sysctlCases() []ruleCase {
	risky := func(name, value string) ruleCase {
		return ruleCase{
			name:   name + "=" + value,
			bundle: bundle(nil, setSysctl(name, value)),
			want: []want{{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: name,
				Evidence: []string{name + " = " + value, "why: "}}},
		}
	}
	fine := func(name, value string) ruleCase {
		return ruleCase{name: name + "=" + value + " is fine", bundle: bundle(nil, setSysctl(name, value))}
	}
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		risky("net.ipv4.tcp_tw_recycle", "1"),
		fine("net.ipv4.tcp_tw_recycle", "0"),
		risky("net.ipv4.tcp_max_tw_buckets", "5000"),
		risky("net.ipv4.tcp_max_tw_buckets", "9999"),
		fine("net.ipv4.tcp_max_tw_buckets", "10000"),
		risky("net.ipv4.tcp_abort_on_overflow", "1"),
		risky("net.ipv4.tcp_timestamps", "0"),
		fine("net.ipv4.tcp_timestamps", "2"),
		risky("net.ipv4.tcp_syncookies", "0"),
		fine("net.ipv4.tcp_syncookies", "2"),
		risky("net.core.netdev_max_backlog", "1"),
		risky("net.core.netdev_max_backlog", "299"),
		fine("net.core.netdev_max_backlog", "300"),
		risky("net.ipv4.tcp_keepalive_time", "3"),
		risky("net.ipv4.tcp_keepalive_time", "59"),
		fine("net.ipv4.tcp_keepalive_time", "60"),
		risky("net.ipv4.tcp_moderate_rcvbuf", "0"),
		risky("net.ipv4.tcp_low_latency", "1"),
		risky("net.core.somaxconn", "10"),
		risky("net.core.somaxconn", "127"),
		fine("net.core.somaxconn", "128"),
		fine("net.core.somaxconn", "65535"),
		fine("net.ipv4.tcp_tw_reuse", "1"),
		fine("net.ipv4.tcp_fin_timeout", "10"),
		{
			name: "copy-paste tuning list (seed 004, advice #15)",
			bundle: bundle(nil, all(setSysctl("net.ipv4.tcp_keepalive_time", "3"), setSysctl("net.ipv4.tcp_tw_recycle", "1"),
				setSysctl("net.core.netdev_max_backlog", "1"), setSysctl("net.ipv4.tcp_max_tw_buckets", "5000"))),
			want: []want{
				{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "net.ipv4.tcp_tw_recycle", Evidence: []string{"net.ipv4.tcp_tw_recycle = 1"}},
				{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "net.ipv4.tcp_max_tw_buckets", Evidence: []string{"net.ipv4.tcp_max_tw_buckets = 5000"}},
				{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "net.core.netdev_max_backlog", Evidence: []string{"net.core.netdev_max_backlog = 1"}},
				{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "net.ipv4.tcp_keepalive_time", Evidence: []string{"net.ipv4.tcp_keepalive_time = 3"}},
			},
		},
		{
			name:   "only the last snapshot counts",
			bundle: bundle(setSysctl("net.ipv4.tcp_tw_recycle", "1"), nil),
		},
		{
			name:   "value that is not a number",
			bundle: bundle(nil, setSysctl("net.ipv4.tcp_syncookies", "")),
		},
		{
			name:   "no sysctls",
			bundle: bundle(nil, func(s *evidence.Snapshot) { s.Sysctls = nil }),
		},
		{
			name:   "one snapshot",
			bundle: single(setSysctl("net.ipv4.tcp_abort_on_overflow", "1")),
			want: []want{{ID: "risky-sysctl", Status: report.Latent, Severity: report.Warning, Subject: "net.ipv4.tcp_abort_on_overflow",
				Evidence: []string{"net.ipv4.tcp_abort_on_overflow = 1"}}},
		},
	}
}

func TestCheckSysctls(t *testing.T) {
	runCases(t, "checkSysctls", checkSysctls, sysctlCases())
}

// TestRiskySysctlFinding compares a whole finding, in a namespace, for a
// per-namespace setting and a global one.
func TestRiskySysctlFinding(t *testing.T) {
	b := inNetNS(bundle(nil, all(setSysctl("net.ipv4.tcp_tw_recycle", "1"), setSysctl("net.core.netdev_max_backlog", "1"))), "feas-srv")
	got := checkSysctls(on(b))
	want := []report.Finding{
		{
			ID: "risky-sysctl", Severity: report.Warning, Status: report.Latent, Subject: "net.ipv4.tcp_tw_recycle", About: report.About{Setting: "net.ipv4.tcp_tw_recycle"},
			Title: "net.ipv4.tcp_tw_recycle = 1: drops SYNs from clients behind NAT",
			Evidence: []report.Item{
				{Text: "net.ipv4.tcp_tw_recycle = 1", Source: "sysctl"},
				{Text: "why: drops SYNs from clients behind NAT; broken since 4.10 and removed in 4.12", Source: "advice"},
			},
			Actions: []report.Action{sysctlFix(b, "net.ipv4.tcp_tw_recycle", "0")},
		},
		{
			ID: "risky-sysctl", Severity: report.Warning, Status: report.Latent, Subject: "net.core.netdev_max_backlog", About: report.About{Setting: "net.core.netdev_max_backlog"},
			Title: "net.core.netdev_max_backlog = 1: a tiny per-CPU input backlog drops received packets under any burst",
			Evidence: []report.Item{
				{Text: "net.core.netdev_max_backlog = 1", Source: "sysctl"},
				{Text: "why: a tiny per-CPU input backlog drops received packets under any burst", Source: "advice"},
			},
			Actions: []report.Action{sysctlFix(b, "net.core.netdev_max_backlog", "1000")},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("checkSysctls(on()) mismatch (-want +got):\n%s", diff)
	}
}

// TestRiskyFixesAreSafe checks that each proposed value is itself not
// flagged, so that following the fix silences the finding.
func TestRiskyFixesAreSafe(t *testing.T) {
	for _, r := range riskySettings {
		b := bundle(nil, setSysctl(r.name, r.value))
		if got := checkSysctls(on(b)); len(got) != 0 {
			t.Errorf("%s = %s, the proposed value, is flagged: %v", r.name, r.value, keys(got))
		}
	}
}
