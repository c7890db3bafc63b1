package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
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
  ´eth0 tx_dropped +343 in 1s´, and says what the device is when it is virtual (´interfaces[].link´: a
  veth with its peer, a bridge's port, a tunnel's lower device and overhead), with both MTUs when a veth's
  peer takes smaller frames than it sends. The subject is the interface.
- The advice follows what the device is: ring (´ethtool -G … rx 4096´), interrupt and RSS advice only
  for a physical NIC whose driver is known (or a device the bundle does not describe); ´ethtool -S´ for
  a device without one; for a veth, its peer (the peer's MTU, down, an XDP program, its namespace's
  backlog), and the MTU to set when the peer's is smaller; for a bridge, its ports' MTUs and STP state;
  for a tun/tap, the program that reads it; for a bond, its ports; for a tunnel, its lower device and
  the headers it adds; for the loopback, the input backlog.
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
		items = append(items, deviceItems(l)...)
		out = append(out, report.Finding{ID: NICDrops, Severity: report.Warning, Status: report.Active, Subject: l.Name, About: report.About{Interface: l.Name},
			Title:    fmt.Sprintf("Interface %s is dropping packets", l.Name),
			Evidence: items,
			Actions:  deviceAdvice(b, l)})
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

// deviceItems say what a device is, when its drops are read against
// something else: a veth's peer with a smaller MTU.
func deviceItems(i evidence.Interface) []report.Item {
	l := i.Link
	if l == nil {
		return nil
	}
	var out []report.Item
	if l.Kind != "device" {
		out = append(out, report.Item{Text: i.Name + " is " + describeLink(l, nil), Source: "interfaces"})
	}
	if p := l.Peer; p != nil && p.MTU > 0 && l.MTU > p.MTU {
		out = append(out, report.Item{Text: fmt.Sprintf("%s's peer %s takes frames of %d bytes at most, %s sends up to %d: what it sends whole above %d is dropped", i.Name, p.Name, p.MTU, i.Name, l.MTU, p.MTU), Source: "interfaces"})
	}
	return out
}

// deviceAdvice is what to look at for a device's drops, by what it is:
// a NIC's rings, interrupts and RSS only for a physical device whose
// driver is known; a veth's peer, a bridge's ports, a tun/tap's reader,
// a tunnel's lower device otherwise.
func deviceAdvice(b *evidence.Bundle, i evidence.Interface) []report.Action {
	name := i.Name
	kind := i.LinkKind
	if i.Link != nil {
		kind = i.Link.Kind
	}
	switch {
	case name == "lo" || kind == "loopback":
		return notes("the loopback has no ring or interrupt: what it drops is what the input backlog could not take (`net.core.netdev_max_backlog`, softnet_stat's dropped column)")
	case kind == "" || kind == "device" && (i.Link == nil || i.Link.Driver != ""):
		// A physical NIC (or a device not described: a bundle without
		// links).
		driver := ""
		if i.Link != nil {
			driver = " (driver " + i.Link.Driver + ")"
		}
		return notes(
			"ethtool -S "+name+driver+" (rx_missed, no_buffer, fifo counters) shows which ring or buffer overflows",
			"ethtool -g "+name+" / ethtool -G "+name+" rx 4096 enlarges the receive ring where the driver allows",
			"spread interrupts over CPUs (RSS, irqbalance, /proc/irq/*/smp_affinity) when one CPU does all receive work",
		)
	case kind == "device":
		return notes("ethtool -S " + name + " shows the driver's own counters, where it has them")
	}
	l := i.Link
	prefix := netns.Parse(b.Host.NetNS).ExecPrefix()
	switch kind {
	case "veth":
		if l != nil && l.Peer != nil {
			out := notes(fmt.Sprintf("a veth has no ring: it drops what its peer %s cannot take — a frame above the peer's MTU (%d; this end's %d), the peer down, an XDP program on it, or its namespace's input backlog (softnet_stat there)", l.Peer.Name, l.Peer.MTU, l.MTU))
			if l.Peer.MTU > 0 && l.MTU > l.Peer.MTU {
				out = append(out, report.Command(fmt.Sprintf("%sip link set dev %s mtu %d", prefix, name, l.Peer.MTU), "both ends of a veth need the same MTU (or raise the peer's)"))
			}
			return out
		}
		return notes("a veth has no ring: it drops what its peer cannot take — a frame above the peer's MTU, the peer down, an XDP program on it, or its namespace's input backlog")
	case "bridge":
		return notes("a bridge drops the frames it cannot forward: a port whose MTU is smaller than the frame, a port not forwarding (STP state), br_netfilter's rules (`bridge -d link show`, `ip -d link show master " + name + "`)")
	case "tun", "tap", "tuntap":
		return notes("the program that reads " + name + " (a VM, a VPN daemon) did not read its queue in time: its CPU, or the queue's length (`ip link set dev " + name + " txqueuelen N`)")
	case "bond", "team":
		return notes("a bond's drops are its ports': read each port's own counters and rings (`ip -s link show master " + name + "`)")
	}
	if l != nil && (l.Lower != nil || l.Overhead > 0) {
		t := name + " sends through its lower device"
		if l.Lower != nil {
			t += fmt.Sprintf(" %s (MTU %d)", l.Lower.Name, l.Lower.MTU)
		}
		if l.Overhead > 0 {
			t += fmt.Sprintf(", adding %d bytes of headers: its MTU (%d) plus them must fit", l.Overhead, l.MTU)
		}
		return notes(t + "; the lower device's own counters say where its packets died")
	}
	return notes("a virtual device (" + kind + "): no ring or interrupt to tune; its drops are what it could not hand on (`ip -d -s link show dev " + name + "`)")
}
