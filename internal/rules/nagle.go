package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// NagleDelayedACK: Nagle's algorithm meets delayed ACKs.
const NagleDelayedACK report.FindingID = "nagle-delayed-ack"

var _ = define(Class{ID: NagleDelayedACK,
	Critical: true,
	Delays:   true, Latency: true,
	// On a leg to a dependency, the stall is part of the time the leg's
	// client waits.
	Consequences: []Consequence{{Effect: LegWait, At: OwnLeg}},
	Meaning:      "Nagle's algorithm on the sending side meets delayed ACK on the receiving side: about 40 ms per small request/response, on the load's connections or on a leg from a server to a dependency",
	Active:       "the load: p50 and p75 in 35–60 ms, client `TcpExtDelayedACKs` ≥ 0.5 per request, responses ≤ 16 KiB, ≥ 20 requests (critical); a leg: the dependency's end (a socket of this host) held written bytes unsent while a segment was unacknowledged in ≥ 10 % of looks (critical when the delayed-ACK timeout is ≥ a fifth of the round trip), or the server's own end did so for its requests, or, that end not seen, answers paused a delayed-ACK timeout (`tcpi_ato`) in ≥ 10 % of looks (warning)",
	LatentWhen:   "—",
	Seed:         "001 §7, and any client/backend pair",
	ReportedBy:   "`run`",
	Doc: `Rule ´nagle´ (´nagle.go´), in ´netdoctor run´. **On the load's connections**, from the load and the
client side: the load's p50 and p75 both inside 35–60 ms (the 40 ms delayed-ACK timer plus scheduling),
at least half a delayed ACK per request on the client (´TcpExtDelayedACKs´ over the load window), small
responses (≤ 16 KiB each) and at least 20 requests. The fix names nginx's ´tcp_nodelay on;´ and, for
other servers, TCP_NODELAY or one write per response. Tested with a server that writes headers and
body separately with Nagle on (seed 001 §7).

**On a leg from a server to a dependency**, from its traced connections (´nagle´ in a dependency's
JSON). tcp_info and sock_diag do not carry TCP_NODELAY, so what Nagle does is read instead: a socket
that holds bytes its application wrote (´tcpi_notsent_bytes´ > 0) while a segment is unacknowledged
(´tcpi_unacked´ > 0) and the congestion window has room (´tcpi_snd_cwnd´) is Nagle waiting for the
other side's ACK (or a cork), and the other side delays that ACK up to its delayed-ACK timeout
(´tcpi_ato´, 40 ms at least). The server's own end is looked at with every look; the dependency's end,
when it is a socket of the server's namespace, is looked up by the reversed addresses at one look in
two, drawn at random (every fourth look beat with a 44 ms exchange and read 10 % held where half were),
while the connection moves.
TCP_NODELAY itself is then read with ´getsockopt´ on a copy of the socket (´pidfd_getfd´): the server's
connections when they are found, and the dependency's sockets that held answers at the end (found
among its listener's owners' descriptors by inode). When the dependency's end is not seen (another
host), the pattern stands in: answers that came in parts a delayed-ACK timeout apart (the 90th
percentile of the time since the last part, at looks inside an answer's pause, within two jiffies
below the timeout and one above; a backend's own 50 ms pause reads 48 ms), with the ACKs the server
sent alone per request as evidence. **Active, critical** when the dependency's end held its answers
in ≥ 10 % of its looks (warning, "the pattern of Nagle", when only the pause says so): title ´Answers
from ADDR wait for KIND's delayed ACK: Nagle's algorithm on ADDR's side …´, evidence the held share,
TCP_NODELAY on those sockets, the pause against the timeout, the ACKs per request; the fix is on the
side that sends the answers (TCP_NODELAY on its accepted sockets, or one write per answer), not
TCP_QUICKACK or ´tcp_low_latency´ on the client. Requests the server's own end held back in ≥ 10 % of
its looks are the same finding about the requests, fixed on the server (TCP_NODELAY on its connections
to the dependency: Java ´setTcpNoDelay´, Node ´setNoDelay´; Go sets it by default). The leg's
´dependency-pool-saturated´ or ´dependency-slow´ is its consequence. Tested (TestRunDependencyAnswerParts)
with a Go and a Node.js front over a backend writing its headers, then its body 20 ms later, with Nagle
on: its end held the body in 49–50 % of the looks, TCP_NODELAY read off, 42–44 ms a request instead of
21; with TCP_NODELAY on, nothing.`,
})

var _ = register(Rule{Name: "nagle", Order: 180, Scope: PerRun, IDs: []report.FindingID{NagleDelayedACK}, Checks: "Nagle and delayed ACKs", Check: checkNagle})

// The Linux delayed-ACK timer fires after 40 ms (TCP_DELACK_MIN); a
// request-response exchange caught between Nagle on the sender and a
// delayed ACK on the receiver takes 40–50 ms whatever the server does.
const (
	nagleLow  = 35 * time.Millisecond
	nagleHigh = 60 * time.Millisecond
)

// checkNagle finds the Nagle / delayed-ACK stall (seed 001 §7): on the
// load's own connections, most latencies in the 40 ms band, small
// responses, and about one delayed ACK per request on the client (a
// server whose configuration turns tcp_nodelay off gets the line to
// change); and on each leg from a server to its dependencies, what the
// traced connections showed (nagleDeps).
func checkNagle(in *Input) []report.Finding {
	if in.Run == nil {
		return nil
	}
	out := nagleDeps(in.Run)
	if f, ok := nagleLoad(in); ok {
		out = append([]report.Finding{f}, out...)
	}
	return out
}

// nagleLoad is the stall on the load's own connections.
func nagleLoad(in *Input) (report.Finding, bool) {
	if in.Run.Client() == nil {
		return report.Finding{}, false
	}
	res, client, start := in.Run.Load, in.Run.Client().Bundle, in.Run.LoadStart
	if res == nil || res.Requests < 20 || client == nil {
		return report.Finding{}, false
	}
	l := res.Latency
	if l.P50 < nagleLow || l.P50 > nagleHigh || l.P75 > nagleHigh {
		return report.Finding{}, false
	}
	w, ok := client.From(start).Window()
	if !ok {
		return report.Finding{}, false
	}
	acks, _ := w.Counter("TcpExt.DelayedACKs")
	perReq := float64(acks) / float64(res.Requests)
	size := res.Bytes / res.Requests
	if perReq < 0.5 || size > 16<<10 {
		return report.Finding{}, false
	}
	f := report.Finding{ID: NagleDelayedACK, Severity: report.Critical, Status: report.Active, Side: "server",
		Title: fmt.Sprintf("Nagle's algorithm meets delayed ACKs: each response waits ~40 ms (p50 %v)", l.P50.Round(100*time.Microsecond)),
		Evidence: []report.Item{
			{Text: fmt.Sprintf("latency p50 %v, p75 %v: inside the 35–60 ms band of the 40 ms delayed-ACK timer", l.P50.Round(100*time.Microsecond), l.P75.Round(100*time.Microsecond)), Source: "load", Window: true},
			{Text: fmt.Sprintf("client TcpExtDelayedACKs +%d for %d requests (%.2f per request)", acks, res.Requests, perReq), Source: "TcpExtDelayedACKs", Window: true},
			{Text: fmt.Sprintf("responses are small (%d bytes each): sent as separate small writes, the second waits for the first's ACK", size), Source: "load", Window: true},
		},
		Actions: notes(
			"nginx: `tcp_nodelay on;` (the default) in the http, server or location block; check `nginx -T | grep tcp_nodelay`",
			"other servers: set TCP_NODELAY on accepted sockets, or send headers and body in one write (writev/sendmsg, or a buffered writer flushed once)",
			"do not try to fix it on the client with tcp_low_latency (a no-op since 4.14)",
		),
	}
	for _, s := range in.Run.Servers {
		if s.Nginx == nil {
			continue
		}
		for _, src := range s.Nginx.NoDelayOff {
			f.Evidence = append(f.Evidence, report.Item{Text: "nginx: tcp_nodelay off at " + src, Source: "nginx -T"})
			f.Actions = append([]report.Action{edit("nginx", src, fmt.Sprintf("set `tcp_nodelay on;` at %s (nginx's default), then nginx -s reload", src), "tcp_nodelay on;")}, f.Actions...)
		}
	}
	return f, true
}

// nagleDeps finds the stall on the legs from the run's servers to their
// dependencies, from what their traced connections showed (app.Nagle):
// answers whose last part waited for the server's delayed ACK (the
// dependency's end held it back, read on that socket when it is one of
// this host's, or answers paused for the delayed-ACK timeout), or
// requests the server's own end held back. The fix is the sender's:
// TCP_NODELAY where the data waited, or one write per message.
func nagleDeps(r *evidence.Run) []report.Finding {
	var out []report.Finding
	for _, s := range r.Servers {
		for i := range s.Deps {
			d := &s.Deps[i]
			n := d.Nagle
			if n == nil || d.Untimed != "" || d.Conns == 0 {
				continue
			}
			who := depName(d)
			subject := s.Kind + " " + s.Addr + " → " + d.Addr
			about := report.About{Server: s.Kind, Listen: s.Addr, Remotes: []string{d.Addr}}
			table := report.Item{Text: depRow(d), Source: "sock_diag tcp_info", Window: true}
			if n.StallsAnswers() {
				f := nagleAnswers(r, s.Kind, who, subject, d, table)
				f.About = about
				out = append(out, f)
			}
			if n.StallsRequests() {
				out = append(out, report.Finding{ID: NagleDelayedACK, Severity: nagleSeverity(d), Status: report.Active, Subject: subject, About: about, Side: r.ServerSide(),
					Title: fmt.Sprintf("Requests from %s %s to %s wait for its delayed ACK: Nagle's algorithm on %s's own connections holds each request's rest until the first part is acknowledged", s.Kind, s.Addr, who, s.Kind),
					Evidence: []report.Item{table,
						{Text: fmt.Sprintf("%s's end held bytes it had written, unsent while a segment was unacknowledged, in %.0f%% of the looks", s.Kind, 100*n.Requests), Source: "sock_diag tcp_info (notsent_bytes, unacked)", Window: true},
						noDelayItem(s.Kind+"'s connections to "+d.Addr, n.NoDelay)},
					Actions: notes(
						fmt.Sprintf("on %s (the side that sends the requests): set TCP_NODELAY on its connections to %s (Java Socket.setTcpNoDelay(true), Node socket.setNoDelay(true), Python setsockopt(IPPROTO_TCP, TCP_NODELAY, 1); Go sets it by default), or write each request in one write (a buffered writer flushed once, writev)", s.Kind, d.Addr),
						"not tcp_low_latency nor TCP_QUICKACK on the other side: the first is a no-op since 4.14, the second lasts one ACK",
					)})
			}
		}
	}
	return out
}

// nagleAnswers is the finding for answers held back at the dependency's
// side.
func nagleAnswers(r *evidence.Run, kind, who, subject string, d *app.Dependency, table report.Item) report.Finding {
	n := d.Nagle
	ev := []report.Item{table}
	sure := n.Answers >= app.NagleHeld
	if sure {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s's end of the connections held bytes its application had written, unsent while a segment was unacknowledged, in %.0f%% of the looks: Nagle's algorithm waiting for %s's ACK", d.Addr, 100*n.Answers, kind), Source: "sock_diag tcp_info (notsent_bytes, unacked)", Window: true})
	}
	if n.PeerNoDelay != "" {
		ev = append(ev, noDelayItem(d.Addr+"'s sockets that held answers", n.PeerNoDelay))
	}
	if n.PauseShare > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("answers came in parts ~%s apart (in %.0f%% of the looks one was paused), and %s's delayed-ACK timeout is %s: the rest of an answer comes when %s acknowledges its first part", ms(n.Pause), 100*n.PauseShare, kind, ms(n.DelayedACK), kind), Source: "sock_diag tcp_info (bytes_received, ato)", Window: true})
	}
	if n.AcksPerRequest > 0 {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s sent %.1f ACKs alone per request (a delayed ACK that fired instead of riding on the next request is one)", kind, n.AcksPerRequest), Source: "sock_diag tcp_info (segs_out)", Window: true})
	}
	title := fmt.Sprintf("Answers from %s wait for %s's delayed ACK: Nagle's algorithm on %s's side holds each answer's rest until its first part is acknowledged (~%s per request)", who, kind, d.Addr, ms(n.DelayedACK))
	if !sure {
		title = fmt.Sprintf("Answers from %s come in parts a delayed-ACK timeout (~%s) apart: the pattern of Nagle's algorithm on %s's side, waiting for %s's delayed ACK", who, ms(n.DelayedACK), d.Addr, kind)
	}
	fix := []string{
		fmt.Sprintf("on %s (the side that sends the answers): set TCP_NODELAY on its accepted sockets (nginx tcp_nodelay on; Java Socket.setTcpNoDelay(true); Node server.listen with noDelay; Python setsockopt(IPPROTO_TCP, TCP_NODELAY, 1)), or write each answer in one write (a buffered writer flushed once, writev)", d.Addr),
		fmt.Sprintf("not on %s: TCP_QUICKACK lasts one ACK and tcp_low_latency is a no-op since 4.14", kind),
	}
	if !sure {
		fix = append([]string{fmt.Sprintf("check TCP_NODELAY where %s runs (netdoctor check there shows its sockets)", d.Addr)}, fix...)
	}
	sev := nagleSeverity(d)
	if !sure {
		sev = report.Warning
	}
	return report.Finding{ID: NagleDelayedACK, Severity: sev, Status: report.Active, Subject: subject, Side: r.ServerSide(),
		Title: title, Evidence: ev, Actions: notes(fix...)}
}

// nagleSeverity is critical when the stall is a fifth of the round trip
// or more.
func nagleSeverity(d *app.Dependency) report.Severity {
	if d.Nagle != nil && d.RoundTrip > 0 && 5*d.Nagle.DelayedACK >= d.RoundTrip {
		return report.Critical
	}
	return report.Warning
}

// noDelayItem says what TCP_NODELAY was on some sockets.
func noDelayItem(what, v string) report.Item {
	if v == "" {
		return report.Item{Text: "TCP_NODELAY on " + what + ": not read", Source: "getsockopt"}
	}
	return report.Item{Text: "TCP_NODELAY on " + what + ": " + v, Source: "getsockopt (a copy of each socket)"}
}
