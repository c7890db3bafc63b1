package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestRiskyTwBuckets: a tcp_max_tw_buckets of 5000 destroys TIME_WAIT
// sockets: it goes to the kernel's own 262144, more than four times the
// 16 sockets in TIME_WAIT and than the host namespace's 131072.
func TestRiskyTwBuckets(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.ipv4.tcp_max_tw_buckets"] = "5000"
	in := readSeed000(t)
	in.Findings = []report.Finding{{ID: rules.RiskySysctl, Status: report.Latent, Subject: "net.ipv4.tcp_max_tw_buckets", About: report.About{Setting: "net.ipv4.tcp_max_tw_buckets"}, Side: "server"}}
	p := build(t, in, h)
	c := change(p, "sysctl:net.ipv4.tcp_max_tw_buckets@")
	if c == nil || c.Sysctl.Current != "5000" || c.Sysctl.Proposed != "262144" || c.Sysctl.Global {
		t.Fatalf("tcp_max_tw_buckets: %s, want 5000 → 262144 in the server's namespace", titles(p))
	}
	if why := strings.Join(c.Why, "\n"); !strings.HasSuffix(why, "; proposed 262144: the larger of 262144 (the kernel's default with 4 GiB of memory or more, or the host namespace's own value when larger) and four times the 16 sockets in TIME_WAIT now") {
		t.Errorf("why %q", why)
	}
}

// TestTimewaitOverflow: tcp_max_tw_buckets at 131072 is not risky, so a
// risky-sysctl finding about it is already corrected; but the table
// overflowed, so timewait-bucket-overflow raises it.
func TestTimewaitOverflow(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{{ID: rules.RiskySysctl, Status: report.Latent, Subject: "net.ipv4.tcp_max_tw_buckets", About: report.About{Setting: "net.ipv4.tcp_max_tw_buckets"}, Side: "server"}}
	if p := build(t, in, seed000Host()); len(p.Changes) != 0 {
		t.Errorf("risky-sysctl on a setting already corrected: %s", titles(p))
	}
	in.Findings = []report.Finding{{ID: rules.TimewaitBucketOverflow, Severity: report.Warning, Status: report.Active, Side: "server"}}
	p := build(t, in, seed000Host())
	if s := sysctlChange(t, p, "net.ipv4.tcp_max_tw_buckets"); s.Current != "131072" || s.Proposed != "262144" {
		t.Errorf("tcp_max_tw_buckets %s → %s, want 131072 → 262144", s.Current, s.Proposed)
	}
}

// TestRiskySomaxconn: somaxconn 10 goes to the advice table's 4096.
func TestRiskySomaxconn(t *testing.T) {
	p := build(t, pick(t, readSeed000(t), rules.RiskySysctl), seed000Host())
	if s := sysctlChange(t, p, "net.core.somaxconn"); s.Current != "10" || s.Proposed != "4096" {
		t.Errorf("somaxconn %s → %s, want 10 → 4096", s.Current, s.Proposed)
	}
}

// TestRiskyCorrected: a risky setting corrected since the report (a
// tcp_keepalive_time of 600 s is not the table's 7200 s, but not risky)
// is left as it is.
func TestRiskyCorrected(t *testing.T) {
	h := seed000Host()
	h.sysctls["netns net.ipv4.tcp_keepalive_time"] = "600"
	in := readSeed000(t)
	in.Findings = []report.Finding{{ID: rules.RiskySysctl, Status: report.Latent, Subject: "net.ipv4.tcp_keepalive_time", About: report.About{Setting: "net.ipv4.tcp_keepalive_time"}, Side: "server"}}
	onlyNote(t, build(t, in, h), "net.ipv4.tcp_keepalive_time is 600 now, no longer risky")
	h.sysctls["netns net.ipv4.tcp_keepalive_time"] = "10"
	if s := sysctlChange(t, build(t, in, h), "net.ipv4.tcp_keepalive_time"); s.Proposed != "7200" {
		t.Errorf("tcp_keepalive_time 10 → %s, want 7200", s.Proposed)
	}
}

// TestGeneric: a finding without a fix of its own takes the setting its
// rule's fix names, host-wide for a global one, with the rule's
// evidence as the reason; without a setting to take, the fix's first
// line is a note.
func TestGeneric(t *testing.T) {
	h := seed000Host()
	h.sysctls["host net.core.netdev_max_backlog"] = "1000"
	in := readSeed000(t)
	in.Findings = []report.Finding{{ID: rules.NICDrops, Status: report.Active, Side: "server",
		Evidence: []report.Item{{Text: "softnet dropped +120 in 7s", Window: true}, {Text: "net.core.netdev_max_backlog = 1000"}},
		Actions: append(report.Advice("spread the load over more CPUs"), report.SetSysctl("net.core.netdev_max_backlog", "2000", "", true),
			report.SetSysctl("net.core.rmem_max", "4194304", "", true))}}
	p := build(t, in, h)
	c := change(p, "sysctl:net.core.netdev_max_backlog@")
	if c == nil || c.Sysctl.Proposed != "2000" || !c.Sysctl.Global || len(p.Changes) != 1 {
		t.Fatalf("%s, want net.core.netdev_max_backlog → 2000 host-wide alone", titles(p))
	}
	if want := "net.core.netdev_max_backlog: the value nic-drops's rule computed from its evidence (softnet dropped +120 in 7s)"; strings.Join(c.Why, "\n") != want {
		t.Errorf("why %q, want %q", c.Why, want)
	}
	in.Findings = []report.Finding{{ID: rules.DNSSlow, Status: report.Active, Side: "server", Fix: []string{"run a local cache", "or two"}, Actions: report.Advice("run a local cache", "or two")}}
	p = build(t, in, h)
	if want := "dns-slow: no automatic change: run a local cache"; len(p.Changes) != 0 || notes(p) != want {
		t.Errorf("%s, want only the note %q", titles(p), want)
	}
}

// TestGenericHyphen: fd-limit's fix raises fs.file-max, whose name has a
// hyphen; the plan takes it, the fix's first setting, not the next.
func TestGenericHyphen(t *testing.T) {
	h := seed000Host()
	h.sysctls["host fs.file-max"] = "65536"
	h.sysctls["host fs.nr_open"] = "1048576"
	in := readSeed000(t)
	in.Findings = []report.Finding{{ID: rules.FDLimit, Status: report.Active, Side: "server",
		Evidence: []report.Item{{Text: "fs.file-nr 65000 of 65536", Window: true}},
		Actions:  []report.Action{report.SetSysctl("fs.file-max", "262144", "", true), report.SetSysctl("fs.nr_open", "2097152", "", true)}}}
	p := build(t, in, h)
	if s := sysctlChange(t, p, "fs.file-max"); s.Current != "65536" || s.Proposed != "262144" || !s.Global || len(p.Changes) != 1 {
		t.Errorf("%s, want fs.file-max 65536 → 262144 host-wide alone", titles(p))
	}
}
