package rules

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// remotes returns a change that replaces the outgoing connection counts.
func remotes(rs ...evidence.Remote) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) { s.Sockets.Remotes = rs }
}

// seed000Range is the port range of seed 000 stage 4: 51 ports.
var seed000Range = setSysctl("net.ipv4.ip_local_port_range", "20000 20050")

var _ = addTable("checkPorts", checkPorts, portsCases)

func portsCases() []ruleCase {
	php := evidence.Remote{Addr: "127.0.0.1:9000", TimeWait: 51, Ephemeral: 51}
	redis := func(tw, est int) evidence.Remote {
		return evidence.Remote{Addr: "10.0.0.5:6379", Established: est, TimeWait: tw, Ephemeral: tw + est}
	}
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "51 ports all used towards php-fpm (seed 000 stage 4)",
			bundle: bundle(seed000Range, all(seed000Range, remotes(php))),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Active, Severity: report.Critical, Subject: "127.0.0.1:9000",
				Evidence: []string{
					"51 of 51 local ports in use towards 127.0.0.1:9000 (0 ESTABLISHED, 51 TIME_WAIT)",
					"net.ipv4.ip_local_port_range = 20000 20050 (51 ports)",
				}}},
		},
		{
			name:   "exhaustion seen in the first snapshot only",
			bundle: bundle(all(seed000Range, remotes(php)), seed000Range),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Active, Severity: report.Critical, Subject: "127.0.0.1:9000",
				Evidence: []string{"51 of 51 local ports in use"}}},
		},
		{
			name: "90% of a 100-port range",
			bundle: bundle(nil, all(setSysctl("net.ipv4.ip_local_port_range", "20000 20099"),
				remotes(evidence.Remote{Addr: "127.0.0.1:9000", Established: 10, TimeWait: 80, Ephemeral: 90}))),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Active, Severity: report.Critical, Subject: "127.0.0.1:9000",
				Evidence: []string{"90 of 100 local ports in use towards 127.0.0.1:9000 (10 ESTABLISHED, 80 TIME_WAIT)"}}},
		},
		{
			name: "89% of a 100-port range is only a small range",
			bundle: bundle(nil, all(setSysctl("net.ipv4.ip_local_port_range", "20000 20099"),
				remotes(evidence.Remote{Addr: "127.0.0.1:9000", TimeWait: 89, Ephemeral: 89}))),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"net.ipv4.ip_local_port_range = 20000 20099 (100 ports)"}}},
		},
		{
			name:   "tiny range, idle",
			bundle: bundle(seed000Range, seed000Range),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"net.ipv4.ip_local_port_range = 20000 20050 (51 ports)"}}},
		},
		{
			name:   "9999 ports is small",
			bundle: bundle(nil, setSysctl("net.ipv4.ip_local_port_range", "50000 59998")),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"(9999 ports)"}}},
		},
		{
			name:   "10000 ports is enough",
			bundle: bundle(nil, setSysctl("net.ipv4.ip_local_port_range", "50000 59999")),
		},
		{
			name:   "ports exhausted by churn (seed 000 stage 5)",
			bundle: bundle(nil, all(remotes(redis(26000, 0)), raise(1000, "Tcp.ActiveOpens"))),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Active, Severity: report.Critical, Subject: "10.0.0.5:6379",
				Evidence: []string{"26000 of 28232 local ports in use towards 10.0.0.5:6379"}}},
		},
		{
			name:   "one snapshot, ports exhausted",
			bundle: single(all(seed000Range, remotes(php))),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Active, Severity: report.Critical, Subject: "127.0.0.1:9000",
				Evidence: []string{"51 of 51 local ports"}}},
		},
		{
			name: "no socket dump",
			bundle: bundle(func(s *evidence.Snapshot) { s.Sockets = nil },
				all(seed000Range, func(s *evidence.Snapshot) { s.Sockets = nil }, raise(1000, "Tcp.ActiveOpens"))),
			want: []want{{ID: "ephemeral-port-exhaustion", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"(51 ports)"}}},
		},
		{
			name:   "no port range",
			bundle: bundle(nil, all(func(s *evidence.Snapshot) { s.Sysctls = nil }, remotes(php))),
		},
		{
			name:   "malformed port range",
			bundle: bundle(nil, setSysctl("net.ipv4.ip_local_port_range", "60999 32768")),
		},
	}
}

func TestCheckPorts(t *testing.T) {
	runCases(t, "checkPorts", checkPorts, portsCases())
}

// TestPortFix checks the advice of the seed 000 stage 4 finding: reuse
// first, then a wider range, then tcp_tw_reuse on the connecting side.
func TestPortFix(t *testing.T) {
	b := inNetNS(bundle(nil, all(seed000Range, setSysctl("net.ipv4.tcp_tw_reuse", "0"),
		remotes(evidence.Remote{Addr: "127.0.0.1:9000", TimeWait: 51, Ephemeral: 51}))), "feas-cli")
	got := checkPorts(on(b))
	if len(got) != 1 {
		t.Fatalf("checkPorts(on()) = %v, want one finding", keys(got))
	}
	want := []string{
		"reuse connections instead of opening one per request (HTTP keep-alive; nginx: an upstream block with `keepalive`, plus `proxy_http_version 1.1; proxy_set_header Connection \"\";` or `fastcgi_keep_conn on;`)",
		"widen the range to 28536 ports (the kernel default's width at least: 0 new connections/s × 60 s a port stays taken × 1.25 = 0 needed per destination)",
		`ip netns exec feas-cli sysctl -w net.ipv4.ip_local_port_range="37000 65535"`,
		`persist: not in /etc/sysctl.d, which is read for the initial namespace only: run the command above where the namespace is created (its setup script, the CNI plugin's tuning), or give the container the sysctl (docker run --sysctl net.ipv4.ip_local_port_range="37000 65535", Kubernetes securityContext.sysctls)`,
		"on this connecting side only, let new connections reuse TIME_WAIT ports older than 1 s (needs tcp_timestamps=1): " +
			sysctlFix(b, "net.ipv4.tcp_tw_reuse", "1").Lines[0] + " — the default 2 applies to loopback only",
	}
	if diff := cmp.Diff(want, fixOf(got[0])); diff != "" {
		t.Errorf("checkPorts(on()) fix mismatch (-want +got):\n%s", diff)
	}

	// Sized from the connect rate, as tune plan sizes it: 1300/s for 60 s
	// with the margin is 97500 ports, more than any range holds: the
	// widest, from 10000. With tcp_tw_reuse on a port is taken for 1 s:
	// the default range would do, and the 51-port one gets the default's
	// width.
	for _, c := range []struct{ reuse, rng, because string }{
		{"0", `ip_local_port_range="10000 65535"`, "1300 new connections/s × 60 s a port stays taken × 1.25 = 97500 needed"},
		{"1", `ip_local_port_range="37000 65535"`, "the kernel default's width at least: 1300 new connections/s × 1 s a port stays taken × 1.25 = 1625 needed"},
	} {
		b = bundle(nil, all(seed000Range, setSysctl("net.ipv4.tcp_tw_reuse", c.reuse), raise(1300, "Tcp.ActiveOpens"),
			remotes(evidence.Remote{Addr: "127.0.0.1:9000", TimeWait: 51, Ephemeral: 51})))
		fix := strings.Join(fixOf(checkPorts(on(b))[0]), "\n")
		if !strings.Contains(fix, c.rng) || !strings.Contains(fix, c.because) {
			t.Errorf("tcp_tw_reuse %s: fix lacks %s because %q:\n%s", c.reuse, c.rng, c.because, fix)
		}
	}

	// A default-sized range with tw_reuse on needs neither change.
	b = bundle(nil, all(setSysctl("net.ipv4.tcp_tw_reuse", "1"), remotes(evidence.Remote{Addr: "10.0.0.5:6379", TimeWait: 28000, Ephemeral: 28000})))
	got = checkPorts(on(b))
	if len(got) != 1 || got[0].ID != "ephemeral-port-exhaustion" {
		t.Fatalf("checkPorts(on()) = %v, want one ephemeral-port-exhaustion", keys(got))
	}
	if len(fixOf(got[0])) != 1 {
		t.Errorf("checkPorts(on()) fix = %q, want only the advice to reuse connections", fixOf(got[0]))
	}
}
