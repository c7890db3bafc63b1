package rules

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// ReceiverWindowLimited: the receivers of a side's connections read
// more slowly than it sends; their windows close, and what the sender
// retransmits meanwhile they had already.
const ReceiverWindowLimited report.FindingID = "receiver-window-limited"

var _ = define(Class{ID: ReceiverWindowLimited,
	Delays:     true,
	Meaning:    "the receivers of a side's connections read more slowly than it sends: their windows close, the sender waits on them, and what it retransmits meanwhile they already had",
	Active:     "the drop monitor's ledger has, on this host, the receiving sockets of ≥ 10 of this side's retransmitted segments, at least half of them, dropping them as data they had or beyond their window (warning)",
	LatentWhen: "none",
	Seed:       "— (downloads to slow clients, consumers that fall behind)",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´receivers´ (´receivers.go´, ´checkReceivers´). It needs the drop monitor's ledger, and the receivers
on this host (another namespace, or a run's other side). A receiver whose window is closed makes its
sender wait; the sender's retransmission timer fires meanwhile, and the segments it retransmits reach the
receiver, whose socket drops them: ´TCP_OLD_DATA´ (data it had), ´TCP_OLD_SEQUENCE´ (the window
probes), ´TCP_ZEROWINDOW´ and ´TCP_OVERWINDOW´ (beyond its window). Those retransmissions are full-size
and unacknowledged, a path MTU black hole's signature without one: the ledger says the path carried
them, so neither ´packet-loss´ on the path nor ´path-mtu-blackhole´ is made of them.

- **Active, warning** when, of this side's connections that retransmitted in the window, those whose
  retransmitted segments the ledger shows dropped by the receiving socket of the same flow (matched by
  flow, through NAT: ´FlowDrop.Client´) account for at least 10 segments and half of all. Subject: the
  busiest receiver's address; ´about.listen´ the local listener the connections are of, when there is
  one.
- Evidence: the share, each receiver (up to three, by address, with its namespace, its connections, the
  segments and what its sockets dropped), the zero-window probes sent (´TcpExtTCPWinProbe´) and the
  duplicates the receivers reported (´TcpExtTCPDSACKRecv´) when they rose.
- Fix (advice): the receivers read faster or with larger buffers (´SO_RCVBUF´, ´net.ipv4.tcp_rmem´ on
  their host); on this side, bound what one slow reader holds (a send timeout: nginx ´send_timeout´), so
  that slow clients cannot pin workers and memory; nothing on the path.

Receivers on another host are not in the ledger: there, the D-SACKs they report keep
´path-mtu-blackhole´ from naming their retransmissions. Tested by TestCheckSlowReceiversNamed (a
Python streaming server and nginx, 16 clients with 8 KiB receive buffers).`,
})

var _ = register(Rule{Name: "receivers", Order: 152, Scope: PerSide, IDs: []report.FindingID{ReceiverWindowLimited}, Checks: "the receivers of retransmitted segments", Check: checkReceivers,
	Looks: func(s *evidence.Snapshot) bool { return s.Drops != nil && s.Drops.Unavailable == "" }})

// minReceiverRetrans is how many retransmitted segments the receivers
// must have dropped: a few are any connection's spurious timeouts.
const minReceiverRetrans = 10

// receiver is one receiving address: its connections that retransmitted
// and what its sockets dropped of them.
type receiver struct {
	addr, ns string
	conns    int
	segs     uint64
	reasons  map[string]uint64
	example  flowRetrans
}

// checkReceivers finds a side whose retransmissions its receivers had
// already, or could not take: slow readers, named by the ledger.
func checkReceivers(in *Input) []report.Finding {
	w, ok := in.Bundle.Window()
	if !ok {
		return nil
	}
	flows := retransIn(w)
	if len(flows) == 0 {
		return nil
	}
	fs := fatesOf(in, w, flows)
	by := map[string]*receiver{}
	var order []string
	var at, all uint64
	conns := 0
	for _, f := range flows {
		all += f.Segments
		k := f.Client().Key()
		if fs.by[k] != fateReceiver {
			continue
		}
		at += f.Segments
		conns++
		var rows []flowDrop
		for _, d := range fs.drops[k] {
			if receiverDrop(d) {
				rows = append(rows, d)
			}
		}
		// The receiver as its socket has it: the packet's destination
		// where it was dropped, after any NAT.
		addr := hostOf(rows[0].Flow.Dst)
		r := by[addr]
		if r == nil {
			r = &receiver{addr: addr, reasons: map[string]uint64{}, example: f}
			if rows[0].NetNS != 0 {
				r.ns = flowNS(rows[0])
			}
			by[addr] = r
			order = append(order, addr)
		}
		r.conns++
		r.segs += f.Segments
		for _, d := range rows {
			r.reasons[d.Reason] += d.Packets
		}
	}
	if at < minReceiverRetrans || at*2 < all {
		return nil
	}
	slices.SortStableFunc(order, func(a, b string) int { return cmp.Compare(by[b].segs, by[a].segs) })
	top := by[order[0]]
	var rows []flowDrop
	for _, f := range flows {
		for _, d := range fs.drops[f.Client().Key()] {
			if receiverDrop(d) {
				rows = append(rows, d)
			}
		}
	}
	f := report.Finding{ID: ReceiverWindowLimited, Severity: report.Warning, Status: report.Active, Subject: top.addr,
		About: report.About{DropReason: receiverReason(rows)},
		Title: fmt.Sprintf("Slow receivers: %s kept %d connection(s) waiting on a closed window; what this side retransmitted, they already had", receiversLabel(by, order), conns)}
	if local := top.example.Local; listening(w.Last, portNum(local)) && hostOf(local) != "0.0.0.0" {
		f.About.Listen = local
	}
	f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("%d of the %d segments retransmitted in %s (%.0f%%), on %d connection(s), reached their receivers, whose sockets dropped them: the drop monitor's ledger, by flow; the path carried them",
		at, all, round(w), 100*float64(at)/float64(all), conns), Source: dropSource, Window: true})
	for i, a := range order {
		if i == 3 {
			break
		}
		r := by[a]
		where := r.addr
		if r.ns != "" {
			where += " (network namespace " + r.ns + ")"
		}
		ex := r.example
		f.Evidence = append(f.Evidence, report.Item{Text: fmt.Sprintf("receiver %s: %d connection(s), %d segments retransmitted to it (e.g. %s → %s: %d, %d full-size), its sockets dropped %s",
			where, r.conns, r.segs, ex.Local, ex.Remote, ex.Segments, ex.Full, reasonCounts(r.reasons)), Source: dropSource, Window: true})
	}
	if it, n := counterItem(w, "TcpExt.TCPWinProbe"); n > 0 {
		it.Text += ": zero-window probes sent, the receivers' windows closed"
		f.Evidence = append(f.Evidence, it)
	}
	if it, n := counterItem(w, "TcpExt.TCPDSACKRecv"); n > 0 {
		it.Text += ": segments the receivers reported as duplicates (D-SACK)"
		f.Evidence = append(f.Evidence, it)
	}
	f.Actions = notes(
		"the receivers ("+receiversLabel(by, order)+") read more slowly than this side sends: make them read faster, or give them larger receive buffers (SO_RCVBUF, net.ipv4.tcp_rmem on their host)",
		"on this side, bound what one slow reader holds: a send timeout (nginx `send_timeout`, a write deadline), so that slow clients cannot pin workers and memory",
		"nothing to change on the path or its MTU: the path carried these segments",
	)
	return []report.Finding{f}
}

// receiversLabel names the receivers: "10.0.1.2", or "10.0.1.2 and 2
// other receivers".
func receiversLabel(by map[string]*receiver, order []string) string {
	if len(order) == 1 {
		return order[0]
	}
	return fmt.Sprintf("%s and %d other receiver(s)", order[0], len(order)-1)
}

// reasonCounts is "TCP_OLD_DATA 40, TCP_OLD_SEQUENCE 12", busiest first.
func reasonCounts(n map[string]uint64) string {
	var rs []string
	for r := range n {
		rs = append(rs, r)
	}
	slices.SortFunc(rs, func(a, b string) int { return cmp.Or(cmp.Compare(n[b], n[a]), cmp.Compare(a, b)) })
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s %d", r, n[r]))
	}
	return strings.Join(out, ", ")
}

// portNum is an address's port, 0 when it has none.
func portNum(addr string) int {
	n, _ := strconv.Atoi(portOf(addr))
	return n
}
