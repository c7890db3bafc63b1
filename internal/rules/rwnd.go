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
	Active:     "over the window, the senders of a listener's connections (or of those to one destination) were held by the receiver's window (`tcpi_rwnd_limited`) ≥ half their busy time and ≥ 1 connection-second a second, with a zero window seen or data queued in their Send-Q (warning)",
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
run beside them (TestRunSlowReaders), named at the server, netdoctor's own client not among them; the
lab's healthy scenario names nothing.`,
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

var _ = register(Rule{Name: "rwnd", Order: 155, Scope: PerSide, IDs: []report.FindingID{ReceiverWindowLimited, SendBufferLimited},
	Checks: "senders held by their receivers' windows or their send buffers", Check: checkRwnd})

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
	who := "its receiver reads"
	subject := g.Subject
	if g.Inbound {
		n := len(slow)
		if n == 0 {
			n = g.Open
		}
		who = fmt.Sprintf("%d clients of %s read", n, g.Subject)
		if n == 1 {
			who = fmt.Sprintf("a client of %s reads", g.Subject)
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
		Title: fmt.Sprintf("%s slowly: their windows hold the sender's data %.0f%% of its busy time (Send-Q %s, %d zero windows)",
			who, 100*share, report.Bytes(float64(g.SendQ)), g.ZeroWindow),
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
