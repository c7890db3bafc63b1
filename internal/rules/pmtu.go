package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// PathMTUBlackhole: a path drops the packets above its MTU, and the
// ICMP "fragmentation needed" (ICMPv6 "packet too big") that would tell
// the sender to send smaller ones never arrives: full-size segments are
// retransmitted until the connection gives up, while small ones pass.
const PathMTUBlackhole report.FindingID = "path-mtu-blackhole"

var _ = define(Class{ID: PathMTUBlackhole,
	Tunables:    []Tunable{{Name: "net.ipv4.tcp_mtu_probing", Values: []string{"1"}, Why: "a path MTU black hole: probe the path's MTU when full-size segments go unanswered"}},
	DropReasons: []string{"PKT_TOO_BIG"}, DropsElsewhere: true, PathFault: true,
	Critical: true,
	Errors:   true, Delays: true, Latency: true, Fails: FailsConnections,
	Meaning:    "a path drops the packets above its MTU and the ICMP that would say so never arrives: full-size segments are retransmitted while small ones pass",
	Active:     "≥ 10 retransmissions, ≥ 95 % of each flow's and ≥ 90 % of all full-size, none fast, fewer ICMP unreachables than a tenth of them (critical); `PKT_TOO_BIG` drops here (warning)",
	LatentWhen: "none",
	Seed:       "—",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´pmtu´ (´pmtu.go´). It needs the drop monitor: the retransmissions' sizes are its.

- **Active, critical** when the flows whose retransmitted segments were at least 95 % full-size (at least
  the flow's MSS, ´mss_cache´) account for at least 10 retransmissions and 90 % of all in the window, and
  fewer ICMP "destination unreachable" (´IcmpMsgInType3´, of which "fragmentation needed" is one) and
  ICMPv6 "packet too big" (´Icmp6InPktTooBigs´) arrived than a tenth of them: what is large is lost, what
  is small passes, and the router's message never came. **Only where the ledger agrees**: the segments
  must have died beyond what the drop monitor sees, or at a router of this host (´PKT_TOO_BIG´). A flow
  whose retransmitted segments the ledger shows reaching their receiver (its socket dropped them as data
  it had, ´TCP_OLD_DATA´, or beyond its window: slow readers, see ´receiver-window-limited´), dropped by a
  device of this host at layer 2 as larger than its MTU (´mtu-mismatch´), or dropped on the host for another
  reason (a qdisc, a firewall) is not the path's; nor are segments the receivers reported as duplicates
  (D-SACK, ´TcpExtTCPDSACKRecv´ at least a tenth of them: they arrived, whatever host the receivers are
  on), nor fast retransmits (a tenth), nor drops here for another reason (half). Subject: the remote
  address of the busiest flow.
  Evidence: the share, each flow (´10.0.0.2:80 → 10.0.1.1:41000: 40 retransmissions, all of 1448 bytes or
  more (MSS 1448); TCP believes the path's MTU is 1500 (tcp_info pmtu, segments of 1448 bytes)´), the
  ICMP and D-SACK counts, ´PKT_TOO_BIG´ drops here or, by flow, of this service's packets in a namespace
  they cross (´PKT_TOO_BIG: 60 tcp packets of 10.0.0.2:80 → 10.0.1.1:41000 dropped in 1s by ip_forward
  on r-c in network namespace router´; named once, from the server's side of a run when it is observed),
  the interfaces' MTUs and ´net.ipv4.tcp_mtu_probing´.
- **Active, warning** when this namespace itself drops ´PKT_TOO_BIG´ (it is the router): with the ICMP
  it sent (´IcmpMsgOutType3´), which a firewall on the way may drop.
- Fix: ´net.ipv4.tcp_mtu_probing=1´ on the sender (it probes smaller segments when full-size ones go
  unanswered); an MSS clamp on the router (´nft add rule inet filter forward tcp flags syn tcp option
  maxseg size set rt mtu´, iptables ´TCPMSS --clamp-mss-to-pmtu´), in the router's namespace when the
  monitor saw it there; let ICMP type 3 code 4 and ICMPv6 "packet too big" through every firewall.

Tested by TestLight/RunPathMTUBlackhole: a router namespace between client and server whose link to the
client has an MTU of 1280, with ICMP "fragmentation needed" dropped on its way out.`,
})

var _ = register(Rule{Name: "pmtu", Order: 150, Scope: PerSide, IDs: []report.FindingID{PathMTUBlackhole}, Checks: "the path MTU", Check: checkPMTU,
	Looks: func(s *evidence.Snapshot) bool { return s.Drops != nil && s.Drops.Unavailable == "" }})

// minFullRetrans is how many full-size retransmissions a black hole
// needs: a handful are any path's losses.
const minFullRetrans = 10

// flowRetrans is a flow's retransmissions in the window.
type flowRetrans struct {
	evidence.Retrans
}

// retransIn are the flows that retransmitted in the window, most first.
func retransIn(w evidence.Window) []flowRetrans {
	a, b := w.First.Drops, w.Last.Drops
	if a == nil || b == nil || b.Unavailable != "" || !a.Since.Equal(b.Since) {
		return nil
	}
	before := map[string]evidence.Retrans{}
	for _, r := range a.Retrans {
		before[r.Local+" "+r.Remote] = r
	}
	var out []flowRetrans
	for _, r := range b.Retrans {
		f := before[r.Local+" "+r.Remote]
		if r.Segments <= f.Segments {
			continue
		}
		n := r
		n.Segments -= f.Segments
		n.Bytes -= min(f.Bytes, r.Bytes)
		n.Full -= min(f.Full, r.Full)
		out = append(out, flowRetrans{n})
	}
	slices.SortStableFunc(out, func(a, b flowRetrans) int { return cmp.Compare(b.Segments, a.Segments) })
	return out
}

// checkPMTU finds a path MTU black hole from the flows whose
// retransmissions are all full-size, the ICMP that never came, and the
// drop monitor's PKT_TOO_BIG where the packets died (here, or in a
// namespace between the two ends of a run).
func checkPMTU(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok {
		return nil
	}
	here, _, haveMonitor := dropsIn(w)
	if !haveMonitor {
		return nil // the segments' sizes are the monitor's
	}
	tooBig := withReason(here, "PKT_TOO_BIG")
	// The service's own packets dropped as too big in a namespace they
	// cross (a router of this host), by flow; named once, from the
	// server's side of a run when it is observed.
	var away []flowDrop
	if namesElsewhere(in) {
		_, elsewhere, _ := ledgerIn(w)
		for _, d := range ownElsewhere(in, elsewhere) {
			if d.Reason == "PKT_TOO_BIG" {
				away = append(away, d)
			}
		}
	}
	// Only what the ledger does not explain is the path's: a
	// retransmitted segment its receiver had already (or refused), or
	// that a device or a queue of this host dropped, did not die of a
	// path's MTU beyond it.
	all := retransIn(w)
	fates := fatesOf(in, w, all)
	var full, segs, explained uint64
	var flows []flowRetrans
	for _, f := range all {
		segs += f.Segments
		switch fates.by[f.Client().Key()] {
		case fateReceiver, fateTooBig, fateDropped:
			explained += f.Segments
			continue
		}
		if f.MSS > 0 && f.Full*100 >= f.Segments*95 {
			full += f.Full
			flows = append(flows, f)
		}
	}
	icmp, _ := w.Counter("IcmpMsg.InType3")
	icmp6, _ := w.Counter("Icmp6.InPktTooBigs")
	// No full-size segment crosses a black hole, so none is ever
	// acknowledged out of order: its retransmissions are timeouts and
	// probes, never fast retransmits (a queue that drops some of them,
	// as a full qdisc does, leaves the others to trigger those).
	fast, _ := w.Counter("TcpExt.TCPFastRetrans")
	// Nor does a receiver ever report one as a duplicate (D-SACK): a
	// segment retransmitted to a receiver that had it (its window
	// closed, or the ACK lost) comes back so, whatever host it is on.
	dsack, _ := w.Counter("TcpExt.TCPDSACKRecv")
	// Nor do they die here for another reason: a local queue or
	// firewall that dropped them is their place.
	var local uint64
	for _, d := range here {
		if !stray[d.Reason] && d.Reason != "PKT_TOO_BIG" {
			local += d.Packets
		}
	}
	blackhole := full >= minFullRetrans && full*100 >= segs*90 && (icmp+icmp6)*10 < full && fast*10 < full && dsack*10 < full && local*2 < full
	dropsHere := blamed(total(tooBig), w)
	var awayN uint64
	for _, d := range away {
		awayN += d.Packets
	}
	dropsAway := blamed(awayN, w)
	if !blackhole && !dropsHere && !dropsAway {
		return nil
	}
	f := report.Finding{ID: PathMTUBlackhole, Severity: report.Critical, Status: report.Active}
	switch {
	case blackhole:
		top := flows[0]
		remote := hostOf(top.Remote)
		f.Subject = remote
		f.Title = fmt.Sprintf("Path MTU black hole towards %s: every retransmission is a full-size segment (MSS %d), and no ICMP \"fragmentation needed\" arrived", remote, top.MSS)
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%d of %d segments retransmitted in %s were full-size (at least the MSS), over %d connection(s): the path loses what is large and lets the rest through",
			full, segs, round(w), len(flows)), Source: dropSource, Window: true})
		for i, fl := range flows {
			if i == 3 {
				break
			}
			t := fmt.Sprintf("%s → %s: %d retransmissions, all of %d bytes or more (MSS %d)", fl.Local, fl.Remote, fl.Segments, fl.MSS, fl.MSS)
			if fl.Open && fl.PMTU > 0 {
				t += fmt.Sprintf("; TCP believes the path's MTU is %d (tcp_info pmtu, segments of %d bytes)", fl.PMTU, fl.SndMSS)
			}
			f.Evidence = append(f.Evidence, report.Item{Text: t, Source: dropSource, Window: true})
		}
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("fast retransmits: %d (TcpExt.TCPFastRetrans), the rest timeouts and probes: no full-size segment was acknowledged out of order, none crossed", fast), Source: "TcpExt.TCPFastRetrans", Window: true})
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("ICMP \"destination unreachable\" received in the window: %d (IcmpMsg.InType3; \"fragmentation needed\" is one of them), ICMPv6 \"packet too big\": %d: the path's router never told the sender its MTU, or a firewall dropped what it said", icmp, icmp6), Source: "IcmpMsg.InType3", Window: true})
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("duplicates reported by the receivers (D-SACK): %d (TcpExt.TCPDSACKRecv): none of the full-size segments reached them; nor did the drop monitor see them reach a receiver or die elsewhere on this host", dsack), Source: "TcpExt.TCPDSACKRecv", Window: true})
	case dropsHere:
		f.Subject = "PKT_TOO_BIG"
		f.Severity = report.Warning
		f.Title = fmt.Sprintf("Packets larger than the next hop's MTU are dropped here: %d in %s", total(tooBig), round(w))
		out, _ := w.Counter("IcmpMsg.OutType3")
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("ICMP \"destination unreachable\" sent in the window: %d (IcmpMsg.OutType3): each dropped packet should have told its sender the MTU; if a firewall on the way drops it, the sender's connection stalls", out), Source: "IcmpMsg.OutType3", Window: true})
	default:
		d := away[0]
		f.Subject = "netns " + flowNS(d)
		f.Title = fmt.Sprintf("This service's large packets die in network namespace %s: %d dropped as larger than the next hop's MTU", flowNS(d), awayN)
	}
	for i, d := range tooBig {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, report.Item{Text: dropText(d, w) + ": larger than the MTU of the next hop", Source: dropSource, Window: true})
	}
	for i, d := range away {
		if i == 3 {
			break
		}
		f.Evidence = append(f.Evidence, report.Item{Text: flowText(d, w) + ": larger than the MTU of the next hop, in the namespace the packets cross", Source: dropSource, Window: true})
	}
	f.Evidence = append(f.Evidence, mtuItems(w.Last)...)
	f.Actions = pmtuFix(b, away)
	return []report.Finding{f}
}

// hostOf is an address without its port.
func hostOf(addrPort string) string {
	if i := strings.LastIndexByte(addrPort, ':'); i > 0 {
		return strings.Trim(addrPort[:i], "[]")
	}
	return addrPort
}

// mtuItems are the namespace's interfaces' MTUs and the probing setting.
func mtuItems(s *evidence.Snapshot) []report.Item {
	var ifs []string
	for _, i := range s.Interfaces {
		if i.Name != "lo" && i.MTU > 0 {
			ifs = append(ifs, fmt.Sprintf("%s %d", i.Name, i.MTU))
		}
	}
	var out []report.Item
	if len(ifs) > 0 {
		out = append(out, report.Item{Text: "interface MTUs here: " + strings.Join(ifs, ", "), Source: "interfaces"})
	}
	if v, ok := s.Sysctls["net.ipv4.tcp_mtu_probing"]; ok {
		out = append(out, settingItem("net.ipv4.tcp_mtu_probing", v))
	}
	return out
}

// pmtuFix names the three ways out: the sender probes for the MTU
// itself, the router clamps the MSS of the connections it forwards, the
// firewalls let the ICMP through.
func pmtuFix(b *evidence.Bundle, away []flowDrop) []report.Action {
	fix := []report.Action{sysctlFix(b, "net.ipv4.tcp_mtu_probing", "1").Because("on the sender, this side, for what it sends: it probes the path's MTU when full-size segments go unanswered instead of waiting for ICMP")}
	router := "on the router whose next hop has the smaller MTU"
	prefix := ""
	if len(away) > 0 {
		router = "on the router (network namespace " + flowNS(away[0]) + ")"
		if away[0].NetNSName != "" {
			prefix = netns.Parse(away[0].NetNSName).ExecPrefix()
		}
	}
	fix = append(fix, notes(
		router+", clamp the MSS of the connections it forwards to the route's MTU: `"+prefix+"nft add rule inet filter forward tcp flags syn tcp option maxseg size set rt mtu` (iptables: `-t mangle -A FORWARD -p tcp --tcp-flags SYN,RST SYN -j TCPMSS --clamp-mss-to-pmtu`)",
		"let ICMP \"fragmentation needed\" (type 3 code 4) and ICMPv6 \"packet too big\" through every firewall on the path: path MTU discovery depends on them")...)
	return fix
}
