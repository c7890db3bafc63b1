package rules

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// resolver returns a change that replaces the resolver evidence.
func resolver(nameservers []string, probes ...evidence.DNSProbe) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		s.Resolver = &evidence.Resolver{ConfPath: "/etc/resolv.conf", Nameservers: nameservers, Probes: probes}
	}
}

func aProbe(server string, d time.Duration, rcode, err string) evidence.DNSProbe {
	return evidence.DNSProbe{Server: server, Type: "A", Name: "web1", Duration: d, Rcode: rcode, Err: err}
}

func ptrProbe(server string, d time.Duration, rcode, err string) evidence.DNSProbe {
	return evidence.DNSProbe{Server: server, Type: "PTR", Name: "10.77.0.1", Duration: d, Rcode: rcode, Err: err}
}

var _ = addTable("checkDNS", checkDNS, dnsCases)

func dnsCases() []ruleCase {
	one := []string{"10.0.0.2"}
	two := []string{"10.0.0.2", "8.8.8.8"}
	noResolver := func(s *evidence.Snapshot) { s.Resolver = nil }
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "empty resolv.conf (seed 001 §4)",
			bundle: bundle(resolver(nil), resolver(nil)),
			want: []want{{ID: "dns-misconfigured", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"/etc/resolv.conf lists no nameserver"}}},
		},
		{
			name:   "no nameserver answers",
			bundle: bundle(nil, resolver(two, aProbe("10.0.0.2", 2*time.Second, "", "timeout"), aProbe("8.8.8.8", time.Millisecond, "", "connection refused"))),
			want: []want{{ID: "dns-misconfigured", Status: report.Active, Severity: report.Critical,
				Evidence: []string{
					"10.0.0.2 A query for web1: timeout after 2s",
					"8.8.8.8 A query for web1: connection refused after 1ms",
					"/etc/resolv.conf: nameservers [10.0.0.2 8.8.8.8]",
				}}},
		},
		{
			name:   "one of two nameservers does not answer",
			bundle: bundle(nil, resolver(two, aProbe("10.0.0.2", 2*time.Second, "", "timeout"), aProbe("8.8.8.8", 12*time.Millisecond, "NOERROR", ""))),
			want: []want{{ID: "dns-slow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"10.0.0.2 A query for web1: timeout after 2s", "nameservers [10.0.0.2 8.8.8.8]"}}},
		},
		{
			name:   "far resolver (seed 001 §4)",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", 140*time.Millisecond, "NOERROR", ""))),
			want: []want{{ID: "dns-slow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"10.0.0.2 A query for web1: NOERROR after 140ms"}}},
		},
		{
			name:   "100 ms is slow",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", 100*time.Millisecond, "NXDOMAIN", ""))),
			want:   []want{{ID: "dns-slow", Status: report.Active, Severity: report.Warning, Evidence: []string{"NXDOMAIN after 100ms"}}},
		},
		{
			name:   "99 ms is not",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", 99*time.Millisecond, "NOERROR", ""))),
		},
		{
			name: "PTR not answered (seed 001 §5, fault 8)",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", 12*time.Millisecond, "NOERROR", ""),
				ptrProbe("10.0.0.2", 2*time.Second, "", "timeout"))),
			want: []want{{ID: "reverse-dns-lookup", Status: report.Latent, Severity: report.Warning,
				Evidence: []string{"10.0.0.2 PTR query for 10.77.0.1: timeout after 2s"}}},
		},
		{
			name:   "slow PTR",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", time.Millisecond, "NOERROR", ""), ptrProbe("10.0.0.2", 300*time.Millisecond, "NXDOMAIN", ""))),
			want:   []want{{ID: "reverse-dns-lookup", Status: report.Latent, Severity: report.Warning, Evidence: []string{"PTR query for 10.77.0.1: NXDOMAIN after 300ms"}}},
		},
		{
			name: "nothing answers at all",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", 2*time.Second, "", "timeout"),
				ptrProbe("10.0.0.2", 2*time.Second, "", "timeout"))),
			want: []want{
				{ID: "dns-misconfigured", Status: report.Active, Severity: report.Critical, Evidence: []string{"A query for web1: timeout"}},
				{ID: "reverse-dns-lookup", Status: report.Latent, Severity: report.Warning, Evidence: []string{"PTR query for 10.77.0.1: timeout"}},
			},
		},
		{
			name: "slow A and hanging PTR",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", 400*time.Millisecond, "NOERROR", ""),
				ptrProbe("10.0.0.2", 2*time.Second, "", "timeout"))),
			want: []want{
				{ID: "dns-slow", Status: report.Active, Severity: report.Warning, Evidence: []string{"NOERROR after 400ms"}},
				{ID: "reverse-dns-lookup", Status: report.Latent, Severity: report.Warning, Evidence: []string{"PTR query for 10.77.0.1: timeout"}},
			},
		},
		{
			// python-dns: 30 % of every query dropped. The lost PTR is
			// the same loss, not reverse lookups of their own.
			name: "a lossy resolver loses a PTR query too",
			bundle: bundle(nil, resolver(one,
				aProbe("10.0.0.2", time.Millisecond, "NOERROR", ""), aProbe("10.0.0.2", time.Millisecond, "NOERROR", ""),
				aProbe("10.0.0.2", 2*time.Second, "", "timeout"), aProbe("10.0.0.2", time.Millisecond, "NOERROR", ""),
				ptrProbe("10.0.0.2", 2*time.Second, "", "timeout"))),
			want: []want{{ID: "dns-slow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"PTR query for 10.77.0.1: timeout"}}},
		},
		{
			name:   "fast NXDOMAIN answers are fine",
			bundle: bundle(nil, resolver(one, aProbe("10.0.0.2", time.Millisecond, "NXDOMAIN", ""), ptrProbe("10.0.0.2", time.Millisecond, "NXDOMAIN", ""))),
		},
		{
			name:   "nameservers but no probes",
			bundle: bundle(resolver(one), resolver(one)),
		},
		{
			name:   "probes from the first snapshot are used",
			bundle: bundle(resolver(one, aProbe("10.0.0.2", 2*time.Second, "", "timeout")), resolver(one)),
			want:   []want{{ID: "dns-misconfigured", Status: report.Active, Severity: report.Critical, Evidence: []string{"timeout after 2s"}}},
		},
		{
			name:   "the last probes win",
			bundle: bundle(resolver(one, aProbe("10.0.0.2", 2*time.Second, "", "timeout")), resolver(one, aProbe("10.0.0.2", time.Millisecond, "NOERROR", ""))),
		},
		{
			name:   "no resolver evidence",
			bundle: bundle(noResolver, noResolver),
		},
		{
			name:   "one snapshot, empty resolv.conf",
			bundle: single(resolver(nil)),
			want:   []want{{ID: "dns-misconfigured", Status: report.Active, Severity: report.Critical, Evidence: []string{"lists no nameserver"}}},
		},
	}
}

func TestCheckDNS(t *testing.T) {
	runCases(t, "checkDNS", checkDNS, dnsCases())
}

// TestDNSMisconfiguredEvidence compares the whole evidence of a resolver
// that does not answer.
func TestDNSMisconfiguredEvidence(t *testing.T) {
	got := checkDNS(on(bundle(nil, resolver([]string{"10.0.0.2"}, aProbe("10.0.0.2", 2*time.Second+300*time.Microsecond, "", "timeout")))))
	if len(got) != 1 {
		t.Fatalf("checkDNS(on()) = %v, want one finding", keys(got))
	}
	want := []report.Item{
		{Text: "10.0.0.2 A query for web1: timeout after 2s", Source: "resolver", Window: true},
		{Text: "/etc/resolv.conf: nameservers [10.0.0.2]", Source: "resolver"},
	}
	if diff := cmp.Diff(want, got[0].Evidence); diff != "" {
		t.Errorf("checkDNS(on()) evidence mismatch (-want +got):\n%s", diff)
	}
}
