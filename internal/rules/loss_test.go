package rules

import (
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// traffic returns a change that adds sent segments and retransmissions.
func traffic(out, retrans, synRetrans uint64) func(*evidence.Snapshot) {
	return all(raise(out, "Tcp.OutSegs"), raise(retrans, "Tcp.RetransSegs"), raise(synRetrans, "TcpExt.TCPSynRetrans"))
}

var _ = addTable("checkLoss", checkLoss, lossCases)

func lossCases() []ruleCase {
	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name:   "healthy traffic, 0.1% retransmitted",
			bundle: bundle(nil, traffic(20000, 20, 0)),
		},
		{
			name: "7.5% retransmitted (fault 7)",
			bundle: bundle(nil, all(traffic(10000, 754, 0), raise(125, "TcpExt.TCPTimeouts"),
				raise(615, "TcpExt.TCPLossProbes"), raise(14, "TcpExt.TCPFastRetrans"))),
			want: []want{{ID: "packet-loss", Status: report.Active, Severity: report.Critical,
				Evidence: []string{
					"754 data retransmissions (TcpRetransSegs minus TcpExtTCPSynRetrans) of 10000 segments sent in 1s",
					"TcpExtTCPTimeouts +125 in 1s",
					"TcpExtTCPLossProbes +615",
					"TcpExtTCPFastRetrans +14",
				}}},
		},
		{
			name:   "exactly 1% is a warning",
			bundle: bundle(nil, traffic(10000, 100, 0)),
			want: []want{{ID: "packet-loss", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"100 data retransmissions (TcpRetransSegs minus TcpExtTCPSynRetrans) of 10000 segments"}}},
		},
		{
			name:   "exactly 5% is critical",
			bundle: bundle(nil, traffic(10000, 500, 0)),
			want:   []want{{ID: "packet-loss", Status: report.Active, Severity: report.Critical, Evidence: []string{"500 data retransmissions"}}},
		},
		{
			name:   "just under 1%",
			bundle: bundle(nil, traffic(10000, 99, 0)),
		},
		{
			name:   "SYN retransmits are left out (fault 1 client)",
			bundle: bundle(nil, traffic(10000, 600, 550)),
		},
		{
			name:   "SYN retransmits subtracted",
			bundle: bundle(nil, traffic(10000, 2412, 593)),
			want: []want{{ID: "packet-loss", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"1819 data retransmissions (TcpRetransSegs minus TcpExtTCPSynRetrans) of 10000 segments"}}},
		},
		{
			name:   "more SYN retransmits than retransmits",
			bundle: bundle(nil, traffic(10000, 100, 300)),
		},
		{
			name:   "too little traffic to judge",
			bundle: bundle(nil, traffic(999, 500, 0)),
		},
		{
			name:   "1000 segments is enough",
			bundle: bundle(nil, traffic(1000, 500, 0)),
			want:   []want{{ID: "packet-loss", Status: report.Active, Severity: report.Critical, Evidence: []string{"500 data retransmissions", "of 1000 segments"}}},
		},
		{
			name:   "counters went backwards",
			bundle: bundle(traffic(1e6, 1e5, 0), nil),
		},
		{
			name:   "no counters",
			bundle: bundle(func(s *evidence.Snapshot) { s.Counters = nil }, func(s *evidence.Snapshot) { s.Counters = nil }),
		},
		{
			name:   "one snapshot",
			bundle: single(nil),
		},
	}
}

func TestCheckLoss(t *testing.T) {
	runCases(t, "checkLoss", checkLoss, lossCases())
}
