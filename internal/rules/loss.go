package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/report"
)

// PacketLoss: segments are lost and retransmitted.
const PacketLoss report.FindingID = "packet-loss"

var _ = define(Class{ID: PacketLoss,
	Critical: true,
	Errors:   true, Delays: true, Latency: true,
	Hold:       15 * time.Minute,
	Meaning:    "TCP retransmits a significant share of what it sends",
	Active:     "data retransmissions ≥ 1 % of `TcpOutSegs` (warning), ≥ 5 % (critical), with ≥ 1000 segments sent",
	LatentWhen: "none",
	Seed:       "001 §1",
	ReportedBy: "`check`, `diagnose`",
})

// minSegments is the traffic below which a retransmission ratio means
// nothing: a handful of retransmits on an idle host is noise.
const minSegments = 1000

// checkLoss finds TCP retransmissions high enough to hurt throughput and
// latency. SYN retransmits are left out: they come from dropped SYNs,
// which the listen rules explain.
func checkLoss(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	out, _ := w.Counter("Tcp.OutSegs")
	retrans, _ := w.Counter("Tcp.RetransSegs")
	syn, _ := w.Counter("TcpExt.TCPSynRetrans")
	if retrans > syn {
		retrans -= syn
	} else {
		retrans = 0
	}
	if out < minSegments || retrans == 0 {
		return nil
	}
	ratio := float64(retrans) / float64(out)
	if ratio < 0.01 {
		return nil
	}
	f := report.Finding{ID: PacketLoss, Severity: report.Warning, Status: report.Active,
		Title: fmt.Sprintf("Packet loss: %.1f%% of TCP segments were retransmitted", 100*ratio),
		Evidence: []report.Item{{
			Text:   fmt.Sprintf("%d data retransmissions (TcpRetransSegs minus TcpExtTCPSynRetrans) of %d segments sent in %s", retrans, out, round(w)),
			Source: "TcpRetransSegs", Window: true,
		}},
		Actions: notes(
			"find where packets die: interface and qdisc drops (`ip -s link`, `tc -s qdisc`), firewall rules that drop (nft/iptables counters), the kernel's drop reasons (`perf record -e skb:kfree_skb -a`)",
			"on a lossy path, BBR (`net.ipv4.tcp_congestion_control=bbr`) holds throughput better than CUBIC",
		),
	}
	if ratio >= 0.05 {
		f.Severity = report.Critical
	}
	for _, c := range []string{"TcpExtTCPTimeouts", "TcpExtTCPLossProbes", "TcpExtTCPFastRetrans", "TcpExtTCPDSACKRecv"} {
		if it, d := counterItem(w, c); d > 0 {
			f.Evidence = append(f.Evidence, it)
		}
	}
	if it, ok := pathLossItem(in); ok {
		f.Evidence = append(f.Evidence, it)
	}
	return []report.Finding{f}
}
