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

// ReceiverWindowLimited: a listener's or a destination's senders wait
// for their receivers' windows.
const ReceiverWindowLimited report.FindingID = "receiver-window-limited"

var _ = define(Class{ID: ReceiverWindowLimited,
	Delays:     true,
	Meaning:    "the connections' senders wait for their receivers' windows: clients (or a destination) that read slowly or into small buffers hold the sender's data in its Send-Q",
	Active:     "over the window, the senders of a listener's connections (or of those to one destination) were held by the receiver's window (`tcpi_rwnd_limited`) ≥ half their busy time and ≥ 1 connection-second a second, with a zero window seen or data queued in their Send-Q; or the drop monitor's ledger has, on this host, the receiving sockets of ≥ 10 of this side's retransmitted segments, at least half of them, dropping them as data they had or beyond their window (warning)",
	LatentWhen: "—",
	Seed:       "issue 37 (20 clients reading a stream slowly into 4 KiB buffers)",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´rwnd´ (´rwnd.go´), in ´check´ and on each side of a run, without a load of its own: each
snapshot reads every TCP connection's tcp_info (´senders´ in a snapshot's JSON) and sums, per listening
port and per peer, the time their senders were busy (´tcpi_busy_time´) and the part the peer's receive
window held them (´tcpi_rwnd_limited´), with the looks' peer windows (´snd_wnd´), zero windows, Send-Q
and send buffers full. **Active, warning** when, between the window's first and last snapshot, a
listener's connections (or the connections made to one destination) were held by their receivers'
windows at least half their busy time and at least one connection-second a second, with a zero window
seen or bytes in their Send-Q. netdoctor's own load is left out: its connections on the client side,
and the load's peer at the server. Title: ´20 clients of 10.0.0.1:80 read slowly: their windows hold
the server's answers 96% of the time (Send-Q 41.2 MiB, 18 zero windows)´. Evidence: the share held, the
server's Send-Q and zero windows now, and the slowest receivers (up to 5) with their mean window, their
Send-Q and the share held (´10.0.0.12: window 1.0 KiB on average, Send-Q 2.1 MiB, held 98% of its busy
time´). The fix is on the receivers' side (read faster, a larger receive buffer: ´SO_RCVBUF´,
´net.ipv4.tcp_rmem´ on their host), and what the server may bound: the memory slow clients pin
(´send_timeout´, ´limit_rate´ in nginx, a per-connection write deadline). Tested
(TestCheckSlowReaders): named in check with the receivers, their windows and the server's Send-Q; in a
run beside them (TestLight/RunSlowReaders), named at the server, netdoctor's own client not among them; the
lab's healthy scenario names nothing.

**From the drop ledger** (´checkReceivers´, run by the same rule): it needs the drop monitor's ledger, and the receivers
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
Python streaming server and nginx, 16 clients with 8 KiB receive buffers).
When both accountings name the receivers on one side, one finding holds both: the senders' time first,
the ledger's segments after it.`,
})

// SendBufferLimited: the senders wait for room in their own send
// buffers.
const SendBufferLimited report.FindingID = "send-buffer-limited"

var _ = define(Class{ID: SendBufferLimited,
	Delays: true, Latency: true,
	Meaning:    "answers wait in the server for room in its socket's send buffer (`SO_SNDBUF`, `net.ipv4.tcp_wmem`): a buffer smaller than what a round trip carries",
	Active:     "in a run, the load's p50 ≥ 30 ms and the largest part of the p50's time split is the server's senders held by their send buffer (`tcpi_sndbuf_limited`), ≥ 25 % of the p50; in check and on each side, a listener's connections (or those to one destination) held by their send buffers ≥ half their busy time and ≥ 1 connection-second a second (warning)",
	LatentWhen: "—",
	Seed:       "issue 37",
	ReportedBy: "`check`, `diagnose`, `run`",
	Doc: `Rule ´rwnd´ (´rwnd.go´). **In check** (and on each side of a run, netdoctor's own load left out),
from the same accounting as ´receiver-window-limited´: **active, warning** when a listener's connections
(or those made to one destination) were held by their own send buffers (´tcpi_sndbuf_limited´) at least
half their busy time and at least one connection-second a second; evidence the share held, the looks
with a full send buffer, the Send-Q. **In a run**, from the time split: **active,
warning** when the load's p50 is at least 30 ms and its largest part is "held by the send buffer"
(´tcpi_sndbuf_limited´ of the load's connections at the server, per answer), at least a quarter of the
p50. Evidence: the split and ´net.ipv4.tcp_wmem´. Fix: a send buffer of at least bandwidth × round trip:
´net.ipv4.tcp_wmem´'s maximum (autotuning) and no fixed ´SO_SNDBUF´ in the server (nginx ´listen …
sndbuf=´, ´proxy_buffers´ are not it). Example split: ´p50 120ms ≈ held by the send buffer 70ms (58%), in
flight (the round trip) 50ms (42%)´. Tested with unit cases only (TestSocketTime, TestSendBufferHeld): no
root scenario holds it yet.`,
})

var _ = register(Rule{Name: "rwnd", Order: 152, Scope: PerSide, IDs: []report.FindingID{ReceiverWindowLimited, SendBufferLimited},
	Checks: "senders held by their receivers' windows or send buffers",
	Check:  func(in *Input) []report.Finding { return joinReceivers(checkRwnd(in), checkReceivers(in)) }})

// joinReceivers makes one receiver-window-limited finding of the two
// accountings that name slow receivers: the senders' time held by their
// windows (tcp_info) and the retransmitted segments their sockets
// dropped (the drop ledger). The first leads; the ledger's evidence
// joins it.
func joinReceivers(senders, ledger []report.Finding) []report.Finding {
	i := slices.IndexFunc(senders, func(f report.Finding) bool { return f.ID == ReceiverWindowLimited })
	if i < 0 {
		return append(senders, ledger...)
	}
	for _, f := range ledger {
		senders[i].Evidence = append(senders[i].Evidence, f.Evidence...)
		if senders[i].About.DropReason == "" {
			senders[i].About.DropReason = f.About.DropReason
		}
	}
	return senders
}

// rwndShare is the least share of their busy time the senders must have
// been held by the receivers' windows; rwndRate the least held time, in
// connections held a second of the window.
const (
	rwndShare = 0.5
	rwndRate  = 1.0
)

func checkRwnd(in *Input) []report.Finding {
	b := in.Bundle
	if b == nil || len(b.Snapshots) < 2 {
		return nil
	}
	span := b.Snapshots[len(b.Snapshots)-1].Time.Sub(b.Snapshots[0].Time)
	if span <= 0 {
		return nil
	}
	groups, peers := senderGroups(in)
	var out []report.Finding
	front := ""
	if in.ServerSide() && in.Run.Load != nil && in.Run.Load.Latency.P50 >= appSlowLatency {
		// The load's own answers, from the time split.
		if ts := TimeSplit(in.Run); ts != nil && ts.Socket != nil && len(ts.P50.Parts) > 0 {
			if top := ts.P50.Parts[0]; top.Bucket == report.BucketSndbuf && top.Share >= socketShare {
				out = append(out, sndbufHeld(in.Run, serverBundle(in.Run), ts, top))
				front = in.Run.Port
			}
		}
	}
	for _, g := range groups {
		// The load's own connections are netdoctor's: at the server, the
		// load's peer is left out of its listener's sum where it is known.
		held := g.SenderCounters
		if g.Inbound {
			for _, p := range peers {
				if p.Inbound && p.Port == g.Port && loadPeer(in, p) {
					held = held.Sub(p.SenderCounters)
				}
			}
		}
		if held.BusyUS > 0 && ratio(held.SndbufLimitedUS, held.BusyUS) >= rwndShare && usDur(held.SndbufLimitedUS).Seconds() >= rwndRate*span.Seconds() &&
			!(g.Inbound && strconv.Itoa(g.Port) == front) {
			out = append(out, sndbufGroup(in, g, held))
		}
		if held.BusyUS == 0 || ratio(held.RwndLimitedUS, held.BusyUS) < rwndShare ||
			usDur(held.RwndLimitedUS).Seconds() < rwndRate*span.Seconds() || held.ZeroWindowLooks == 0 && g.SendQ == 0 {
			continue
		}
		out = append(out, rwndFinding(in, g, held, peers))
	}
	return out
}

// rwndFinding names a group's receivers: for a listener, its slowest
// clients; for a destination, itself.
func rwndFinding(in *Input, g senderGroup, held evidence.SenderCounters, peers []evidence.SenderGroup) report.Finding {
	var slow []evidence.SenderGroup
	if g.Inbound {
		for _, p := range peers {
			if p.Inbound && (p.Port == 0 || p.Port == g.Port) && !loadPeer(in, p) && p.BusyUS > 0 && ratio(p.RwndLimitedUS, p.BusyUS) >= rwndShare {
				slow = append(slow, p)
			}
		}
		slices.SortFunc(slow, func(a, b evidence.SenderGroup) int {
			return cmp.Or(cmp.Compare(b.RwndLimitedUS, a.RwndLimitedUS), strings.Compare(a.Peer, b.Peer))
		})
	}
	share := ratio(held.RwndLimitedUS, held.BusyUS)
	who, whose := "its receiver reads", "its"
	subject := g.Subject
	if g.Inbound {
		n := len(slow)
		if n == 0 {
			n = g.Open
		}
		who, whose = fmt.Sprintf("%d clients of %s read", n, g.Subject), "their"
		if n == 1 {
			who, whose = fmt.Sprintf("a client of %s reads", g.Subject), "its"
			if g.Open > 1 {
				who = fmt.Sprintf("a client of %s (%d connections) reads", g.Subject, g.Open)
			}
		}
	} else {
		who = g.Peer + " reads"
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("the senders were held by the receivers' windows %s of %s busy (%.0f%%; tcpi_rwnd_limited), zero windows in %d of %d looks",
			report.Dur(usDur(held.RwndLimitedUS)), report.Dur(usDur(held.BusyUS)), 100*share, held.ZeroWindowLooks, held.Looks), Source: "tcp_info", Window: true},
		{Text: fmt.Sprintf("now: %d connections open, Send-Q %s, %d of them with a zero window", g.Open, report.Bytes(float64(g.SendQ)), g.ZeroWindow), Source: "sock_diag"},
	}
	if len(slow) > 0 {
		var lines []string
		for _, p := range slow[:min(5, len(slow))] {
			lines = append(lines, fmt.Sprintf("%s: window %s on average, Send-Q %s, held %.0f%% of its busy time",
				p.Peer, report.Bytes(float64(avg(p.SndWndSum, p.Looks))), report.Bytes(float64(p.SendQ)), 100*ratio(p.RwndLimitedUS, p.BusyUS)))
		}
		more := ""
		if len(slow) > 5 {
			more = fmt.Sprintf(" (and %d more)", len(slow)-5)
		}
		ev = append(ev, report.Item{Text: "the slowest receivers" + more + ": " + strings.Join(lines, "; "), Source: "tcp_info", Window: true})
	}
	return report.Finding{ID: ReceiverWindowLimited, Severity: report.Warning, Status: report.Active, Side: in.Side,
		Subject: subject, About: g.About,
		Title: fmt.Sprintf("%s slowly: %s windows hold the sender's data %.0f%% of its busy time (Send-Q %s, %d zero windows)",
			who, whose, 100*share, report.Bytes(float64(g.SendQ)), g.ZeroWindow),
		Evidence: ev,
		Actions: notes(
			"on the receivers: read faster, or give them a larger receive buffer (SO_RCVBUF, net.ipv4.tcp_rmem on their host): the window is theirs, not the sender's",
			"on the sender: bound what slow readers pin in memory and workers: a write timeout per connection (nginx `send_timeout`, `limit_rate`), or close connections that stall",
		)}
}

// avg is a sum over a count, 0 without one.
func avg(sum, n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return sum / n
}

// sndbufHeld is the finding of answers held by the server's own send
// buffers.
func sndbufHeld(r *evidence.Run, b *evidence.Bundle, ts *report.TimeSplit, top report.Part) report.Finding {
	ev := []report.Item{splitItem(ts)}
	if v := lastSysctl(b, "net.ipv4.tcp_wmem"); v != "" {
		ev = append(ev, settingItem("net.ipv4.tcp_wmem", v))
	}
	return report.Finding{ID: SendBufferLimited, Severity: report.Warning, Status: report.Active, Side: r.ServerSide(),
		Subject: "senders of :" + r.Port, About: report.About{Listen: frontAddr(r)},
		Title:    fmt.Sprintf("Answers wait for room in the server's send buffers (p50 %s, %s of it)", report.Dur(ts.P50.Latency), report.Dur(top.Time)),
		Evidence: ev,
		Actions: notes("size the send buffer to at least bandwidth × round trip: raise net.ipv4.tcp_wmem's maximum (autotuning) and drop a fixed SO_SNDBUF in the server (nginx `listen … sndbuf=`)",
			"net.ipv4.tcp_notsent_lowat bounds what waits unsent; it does not make room"),
	}
}

// sndbufGroup is the finding of a group's senders held by their own
// send buffers, without a load: the application writes more than the
// buffer holds, faster than a round trip drains it.
func sndbufGroup(in *Input, g senderGroup, held evidence.SenderCounters) report.Finding {
	share := ratio(held.SndbufLimitedUS, held.BusyUS)
	ev := []report.Item{
		{Text: fmt.Sprintf("the senders were held by their send buffers %s of %s busy (%.0f%%; tcpi_sndbuf_limited), the buffer full in %d of %d looks",
			report.Dur(usDur(held.SndbufLimitedUS)), report.Dur(usDur(held.BusyUS)), 100*share, held.SndbufFullLooks, held.Looks), Source: "tcp_info", Window: true},
		{Text: fmt.Sprintf("now: %d connections open, Send-Q %s", g.Open, report.Bytes(float64(g.SendQ))), Source: "sock_diag"},
	}
	if v := lastSysctl(in.Bundle, "net.ipv4.tcp_wmem"); v != "" {
		ev = append(ev, settingItem("net.ipv4.tcp_wmem", v))
	}
	return report.Finding{ID: SendBufferLimited, Severity: report.Warning, Status: report.Active, Side: in.Side,
		Subject: g.Subject, About: g.About,
		Title:    fmt.Sprintf("The senders of %s wait for room in their send buffers %.0f%% of their busy time (Send-Q %s)", g.Subject, 100*share, report.Bytes(float64(g.SendQ))),
		Evidence: ev,
		Actions: notes("size the send buffer to at least bandwidth × round trip: raise net.ipv4.tcp_wmem's maximum (autotuning) and drop a fixed SO_SNDBUF in the sender",
			"net.ipv4.tcp_notsent_lowat bounds what waits unsent; it does not make room"),
	}
}

// The receivers the drop ledger names: the retransmitted segments their
// sockets dropped.

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
