package rules

import (
	"fmt"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Findings of this file.
const (
	PacketLoss report.FindingID = "packet-loss" // segments are lost and retransmitted
	NICDrops   report.FindingID = "nic-drops"   // an interface or the softnet backlog drops packets
)

// minSegments is the traffic below which a retransmission ratio means
// nothing: a handful of retransmits on an idle host is noise.
const minSegments = 1000

// checkLoss finds TCP retransmissions high enough to hurt throughput and
// latency. SYN retransmits are left out: they come from dropped SYNs,
// which the listen rules explain.
func checkLoss(b *evidence.Bundle) []report.Finding {
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
			Text:   fmt.Sprintf("%d data retransmissions (Tcp.RetransSegs minus TcpExt.TCPSynRetrans) of %d segments sent in %s", retrans, out, round(w)),
			Source: "Tcp.RetransSegs", Window: true,
		}},
		Fix: []string{
			"find where packets die: interface and qdisc drops (`ip -s link`, `tc -s qdisc`), firewall rules that drop (nft/iptables counters), the kernel's drop reasons (`perf record -e skb:kfree_skb -a`)",
			"on a lossy path, BBR (`net.ipv4.tcp_congestion_control=bbr`) holds throughput better than CUBIC",
		},
	}
	if ratio >= 0.05 {
		f.Severity = report.Critical
	}
	for _, c := range []string{"TcpExt.TCPTimeouts", "TcpExt.TCPLossProbes", "TcpExt.TCPFastRetrans", "TcpExt.TCPDSACKRecv"} {
		if it, d := counterItem(w, c); d > 0 {
			f.Evidence = append(f.Evidence, it)
		}
	}
	return []report.Finding{f}
}

// checkNIC finds packets dropped by interfaces and by the per-CPU backlog.
func checkNIC(b *evidence.Bundle) []report.Finding {
	w, ok := b.Window()
	if !ok {
		return nil
	}
	var out []report.Finding
	first := map[string]evidence.Interface{}
	for _, i := range w.First.Interfaces {
		first[i.Name] = i
	}
	for _, l := range w.Last.Interfaces {
		f, seen := first[l.Name]
		if !seen {
			continue
		}
		var items []report.Item
		add := func(what string, a, b uint64) {
			if b > a {
				items = append(items, report.Item{Text: fmt.Sprintf("%s %s +%d in %s", l.Name, what, b-a, round(w)), Source: "/proc/net/dev", Window: true})
			}
		}
		add("rx_dropped", f.RxDrop, l.RxDrop)
		add("rx_errors", f.RxErrs, l.RxErrs)
		add("rx_fifo", f.RxFifo, l.RxFifo)
		add("tx_dropped", f.TxDrop, l.TxDrop)
		add("tx_errors", f.TxErrs, l.TxErrs)
		add("tx_carrier", f.TxCarrier, l.TxCarrier)
		if len(items) == 0 {
			continue
		}
		out = append(out, report.Finding{ID: NICDrops, Severity: report.Warning, Status: report.Active, Subject: l.Name,
			Title:    fmt.Sprintf("Interface %s is dropping packets", l.Name),
			Evidence: items,
			Fix: []string{
				"ethtool -S " + l.Name + " (rx_missed, no_buffer, fifo counters) shows which ring or buffer overflows",
				"ethtool -g " + l.Name + " / ethtool -G " + l.Name + " rx 4096 enlarges the receive ring where the driver allows",
				"spread interrupts over CPUs (RSS, irqbalance, /proc/irq/*/smp_affinity) when one CPU does all receive work",
			}})
	}
	var dropped uint64
	for i, s := range w.Last.Softnet {
		if i < len(w.First.Softnet) && s.Dropped > w.First.Softnet[i].Dropped {
			dropped += s.Dropped - w.First.Softnet[i].Dropped
		}
	}
	if dropped > 0 {
		backlog, known := SysctlInt(w.Last, "net.core.netdev_max_backlog")
		items := []report.Item{{Text: fmt.Sprintf("softnet_stat dropped +%d in %s", dropped, round(w)), Source: "/proc/net/softnet_stat", Window: true}}
		if known {
			items = append(items, settingItem("net.core.netdev_max_backlog", fmt.Sprint(backlog)))
		} else {
			backlog = 1000 // the kernel default
		}
		out = append(out, report.Finding{ID: NICDrops, Severity: report.Warning, Status: report.Active, Subject: "softnet",
			Title:    "Per-CPU input backlog overflow: received packets dropped before the protocol stack",
			Evidence: items,
			Fix: append(sysctlFix(b, "net.core.netdev_max_backlog", fmt.Sprint(max(2*backlog, 2000))),
				"time_squeeze alone is not a drop; raise the backlog only while this drop counter rises"),
		})
	}
	return out
}
