package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// NICDrops: an interface or the softnet backlog drops packets.
const NICDrops report.FindingID = "nic-drops"

var _ = define(Class{ID: NICDrops,
	Tunables:    []Tunable{{Name: "net.core.netdev_max_backlog", Min: 1000, Max: 1 << 18, Why: "the kernel's default to 256k packets per CPU"}},
	DropReasons: []string{"CPU_BACKLOG"},
	Errors:      true, Delays: true,
	Hold:       30 * time.Minute,
	Meaning:    "an interface, or the per-CPU input backlog, drops packets",
	Active:     "an interface drop/error counter or softnet `dropped` rose (warning)",
	LatentWhen: "none",
	Seed:       "001 §1",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´nic´ (´nic.go´, ´checkNIC´). It needs two snapshots.

- Per interface present in both snapshots (by name): **active, warning** when the receive drop, errs
  or fifo column, or the transmit drop, errs or carrier column, of ´/proc/net/dev´ rose. The evidence
  names them ´rx_dropped´, ´rx_errors´, ´rx_fifo´, ´tx_dropped´, ´tx_errors´ and ´tx_carrier´, as in
  ´eth0 tx_dropped +343 in 1s´. The subject is the interface.
- Per-CPU backlog: **active, warning** when the ´dropped´ column of ´/proc/net/softnet_stat´, summed
  over CPUs, rose (´softnet_stat dropped +12 in 1s´, plus ´net.core.netdev_max_backlog = N´). The
  subject is ´softnet´. ´time_squeeze´ alone is not a drop and is ignored. The fix doubles
  ´netdev_max_backlog´, to at least 2000.`,
})

var _ = register(Rule{Name: "nic", Order: 70, Scope: PerSide, IDs: []report.FindingID{NICDrops}, Checks: "interface and softnet drops", Check: checkNIC})

// checkNIC finds packets dropped by interfaces and by the per-CPU backlog.
func checkNIC(in *Input) []report.Finding {
	b := in.Bundle
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
		out = append(out, report.Finding{ID: NICDrops, Severity: report.Warning, Status: report.Active, Subject: l.Name, About: report.About{Interface: l.Name},
			Title:    fmt.Sprintf("Interface %s is dropping packets", l.Name),
			Evidence: items,
			Actions: notes(
				"ethtool -S "+l.Name+" (rx_missed, no_buffer, fifo counters) shows which ring or buffer overflows",
				"ethtool -g "+l.Name+" / ethtool -G "+l.Name+" rx 4096 enlarges the receive ring where the driver allows",
				"spread interrupts over CPUs (RSS, irqbalance, /proc/irq/*/smp_affinity) when one CPU does all receive work",
			)})
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
		items = append(items, dropItems(in, "CPU_BACKLOG")...)
		if known {
			items = append(items, settingItem("net.core.netdev_max_backlog", fmt.Sprint(backlog)))
		} else {
			backlog = 1000 // the kernel default
		}
		out = append(out, report.Finding{ID: NICDrops, Severity: report.Warning, Status: report.Active, Subject: "softnet",
			Title:    "Per-CPU input backlog overflow: received packets dropped before the protocol stack",
			Evidence: items,
			Actions: []report.Action{sysctlFix(b, "net.core.netdev_max_backlog", fmt.Sprint(max(2*backlog, 2000))),
				report.Advise("time_squeeze alone is not a drop; raise the backlog only while this drop counter rises")},
		})
	}
	return out
}
