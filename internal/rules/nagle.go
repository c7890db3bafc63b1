package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/report"
)

// NagleDelayedACK: Nagle's algorithm meets delayed ACKs.
const NagleDelayedACK report.FindingID = "nagle-delayed-ack"

var _ = define(Class{ID: NagleDelayedACK,
	Critical: true,
	Delays:   true, Latency: true,
	Meaning:    "Nagle's algorithm on the server meets delayed ACK on the client: about 40 ms per small request/response",
	Active:     "load p50 and p75 in 35–60 ms, client `TcpExtDelayedACKs` ≥ 0.5 per request, responses ≤ 16 KiB, ≥ 20 requests (critical)",
	LatentWhen: "—",
	Seed:       "001 §7",
	ReportedBy: "`run`",
})

// The Linux delayed-ACK timer fires after 40 ms (TCP_DELACK_MIN); a
// request-response exchange caught between Nagle on the sender and a
// delayed ACK on the receiver takes 40–50 ms whatever the server does.
const (
	nagleLow  = 35 * time.Millisecond
	nagleHigh = 60 * time.Millisecond
)

// checkNagle finds the Nagle / delayed-ACK stall (seed 001 §7): most
// latencies in the 40 ms band, small responses, and about one delayed ACK
// per request on the client. A server whose configuration turns
// tcp_nodelay off gets the line to change.
func checkNagle(in *Input) []report.Finding {
	if in.Run == nil || in.Run.Client() == nil {
		return nil
	}
	res, client, start := in.Run.Load, in.Run.Client().Bundle, in.Run.LoadStart
	if res == nil || res.Requests < 20 || client == nil {
		return nil
	}
	l := res.Latency
	if l.P50 < nagleLow || l.P50 > nagleHigh || l.P75 > nagleHigh {
		return nil
	}
	w, ok := client.From(start).Window()
	if !ok {
		return nil
	}
	acks, _ := w.Counter("TcpExt.DelayedACKs")
	perReq := float64(acks) / float64(res.Requests)
	size := res.Bytes / res.Requests
	if perReq < 0.5 || size > 16<<10 {
		return nil
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
	return []report.Finding{f}
}
