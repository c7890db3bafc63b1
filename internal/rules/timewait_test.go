package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

const twOverflowMsg = "TCP: time wait bucket table overflow"

var _ = addTable("checkTimeWait", checkTimeWait, timeWaitCases)

func timeWaitCases() []ruleCase {
	tiny := setSysctl("net.ipv4.tcp_max_tw_buckets", "10")
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "overflow counter rising (fault 6)",
			bundle: bundle(tiny, all(tiny, raise(19428, "TcpExt.TCPTimeWaitOverflow"), func(s *evidence.Snapshot) { s.Sockstat["TCP.tw"] = 10 })),
			want: []want{{ID: "timewait-bucket-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{
					"TcpExtTCPTimeWaitOverflow +19428 in 1s (19428.0/s)",
					"net.ipv4.tcp_max_tw_buckets = 10",
					"10 sockets in TIME_WAIT at the end of the window",
				}}},
		},
		{
			name:   "kernel message only (older kernels, seed 004)",
			bundle: bundle(nil, kmsgs("timewait-overflow", twOverflowMsg, twOverflowMsg)),
			want: []want{{ID: "timewait-bucket-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"kernel: " + twOverflowMsg, "net.ipv4.tcp_max_tw_buckets = 131072"}}},
		},
		{
			name:   "no sockstat",
			bundle: bundle(nil, all(raise(1, "TcpExt.TCPTimeWaitOverflow"), func(s *evidence.Snapshot) { s.Sockstat = nil })),
			want: []want{{ID: "timewait-bucket-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"TcpExtTCPTimeWaitOverflow +1 in 1s"}}},
		},
		{
			name:   "many TIME_WAIT sockets are no finding",
			bundle: bundle(nil, func(s *evidence.Snapshot) { s.Sockstat["TCP.tw"] = 120000 }),
		},
		{
			name:   "counter went backwards",
			bundle: bundle(raise(19428, "TcpExt.TCPTimeWaitOverflow"), nil),
		},
		{
			name:   "counter missing from the first snapshot",
			bundle: bundle(func(s *evidence.Snapshot) { delete(s.Counters, "TcpExt.TCPTimeWaitOverflow") }, raise(19428, "TcpExt.TCPTimeWaitOverflow")),
		},
		{
			name:   "unrelated kernel message",
			bundle: bundle(nil, kmsgs("syn-flooding", "TCP: request_sock_TCP: Possible SYN flooding on port 80. Sending cookies.")),
		},
		{
			name:   "one snapshot",
			bundle: single(kmsgs("timewait-overflow", twOverflowMsg)),
		},
	}
}

func TestCheckTimeWait(t *testing.T) {
	runCases(t, "checkTimeWait", checkTimeWait, timeWaitCases())
}

// TestTimeWaitEvidence compares the whole evidence and the fix of the
// fault-6 finding, in a namespace.
func TestTimeWaitEvidence(t *testing.T) {
	tiny := setSysctl("net.ipv4.tcp_max_tw_buckets", "10")
	b := inNetNS(bundle(tiny, all(tiny, raise(19428, "TcpExt.TCPTimeWaitOverflow"),
		kmsgs("timewait-overflow", twOverflowMsg, twOverflowMsg),
		func(s *evidence.Snapshot) { s.Sockstat["TCP.tw"] = 10 })), "feas-srv")
	got := checkTimeWait(on(b))
	if len(got) != 1 {
		t.Fatalf("checkTimeWait(on()) = %v, want one finding", keys(got))
	}
	wantEvidence := []report.Item{
		{Text: "TcpExtTCPTimeWaitOverflow +19428 in 1s (19428.0/s)", Source: "TcpExtTCPTimeWaitOverflow", Window: true},
		{Text: "kernel: " + twOverflowMsg, Source: "kmsg", Window: true},
		{Text: "net.ipv4.tcp_max_tw_buckets = 10", Source: "sysctl"},
		{Text: "10 sockets in TIME_WAIT at the end of the window", Source: "sockstat", Window: true},
	}
	if diff := cmp.Diff(wantEvidence, got[0].Evidence); diff != "" {
		t.Errorf("checkTimeWait(on()) evidence mismatch (-want +got):\n%s", diff)
	}
	wantFix := append(sysctlFix(b, "net.ipv4.tcp_max_tw_buckets", "262144").Lines,
		"a small tcp_max_tw_buckets does not save memory worth having (40k TIME_WAIT < 10 MiB); the lasting fix is fewer short connections (keep-alive, connection pools)")
	if diff := cmp.Diff(wantFix, fixOf(got[0])); diff != "" {
		t.Errorf("checkTimeWait(on()) fix mismatch (-want +got):\n%s", diff)
	}
}
