package rules

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
)

// readersBundle is check's two snapshots 3 s apart of a listener on
// port 80 whose n clients each held its sender busy the whole window,
// held share of it by their windows (zero windows seen), with 62 KiB in
// each one's Send-Q, as TestCheckSlowReaders measured them.
func readersBundle(n int, held float64) *evidence.Bundle {
	b := bundle(nil, nil)
	b.Snapshots[1].Time = t0.Add(3 * time.Second)
	var peers []evidence.SenderGroup
	var sum evidence.SenderCounters
	for i := range n {
		c := evidence.SenderCounters{BusyUS: 3e6, RwndLimitedUS: uint64(held * 3e6), Looks: 1}
		if held > 0.5 {
			c.ZeroWindowLooks, c.SndbufFullLooks = 1, 1
		}
		peers = append(peers, evidence.SenderGroup{Port: 80, Peer: fmt.Sprintf("10.0.0.%d", 10+i), Inbound: true, Since: t0.Add(-time.Minute), Open: 1, SendQ: 62 << 10, SenderCounters: c})
		sum.Add(c)
	}
	l := evidence.SenderGroup{Port: 80, Since: t0.Add(-time.Minute), Open: n, SendQ: uint64(n) * 62 << 10, ZeroWindow: n, SenderCounters: sum}
	b.Snapshots[0].Senders = &evidence.Senders{Since: t0.Add(-time.Minute), Listeners: []evidence.SenderGroup{{Port: 80, Since: l.Since}}}
	for _, p := range peers {
		b.Snapshots[0].Senders.Peers = append(b.Snapshots[0].Senders.Peers, evidence.SenderGroup{Port: 80, Peer: p.Peer, Inbound: true, Since: p.Since})
	}
	b.Snapshots[1].Senders = &evidence.Senders{Since: t0.Add(-time.Minute), Listeners: []evidence.SenderGroup{l}, Peers: peers}
	return b
}

// TestRwnd: 20 slow readers of a listener are named in check, with
// their windows and the server's Send-Q; readers that their windows
// held a tenth of the time are not.
func TestRwnd(t *testing.T) {
	fs := checkRwnd(&Input{Bundle: readersBundle(20, 1)})
	if len(fs) != 1 || fs[0].ID != ReceiverWindowLimited {
		t.Fatalf("got %+v", fs)
	}
	want := "20 clients of 0.0.0.0:80 read slowly: their windows hold the sender's data 100% of its busy time (Send-Q 1.2 MiB, 20 zero windows)"
	if fs[0].Title != want {
		t.Errorf("title %q, want %q", fs[0].Title, want)
	}
	text := strings.Join(evidenceTexts(fs[0]), "\n")
	for _, e := range []string{"now: 20 connections open, Send-Q 1.2 MiB, 20 of them with a zero window",
		"the slowest receivers (and 15 more): 10.0.0.10: window 0 B on average, Send-Q 62.0 KiB, held 100% of its busy time"} {
		if !strings.Contains(text, e) {
			t.Errorf("evidence lacks %q:\n%s", e, text)
		}
	}
	if fs := checkRwnd(&Input{Bundle: readersBundle(20, 0.1)}); len(fs) > 0 {
		t.Errorf("held a tenth of the time: %s", fs[0].Title)
	}
}

// TestSendBufferHeld: without a load, connections to a destination whose
// senders waited for room in their send buffers most of their busy
// time are named, with tcp_wmem.
func TestSendBufferHeld(t *testing.T) {
	b := bundle(nil, setSysctl("net.ipv4.tcp_wmem", "4096 16384 65536"))
	b.Snapshots[1].Time = t0.Add(3 * time.Second)
	since := t0.Add(-time.Minute)
	b.Snapshots[0].Senders = &evidence.Senders{Since: since, Peers: []evidence.SenderGroup{{Peer: "10.0.0.9:9000", Since: since}}}
	c := evidence.SenderCounters{BusyUS: 6e6, SndbufLimitedUS: 5e6, Looks: 6, SndbufFullLooks: 5}
	b.Snapshots[1].Senders = &evidence.Senders{Since: since, Peers: []evidence.SenderGroup{{Peer: "10.0.0.9:9000", Since: since, Open: 2, SendQ: 128 << 10, SenderCounters: c}}}
	fs := checkRwnd(&Input{Bundle: b})
	if len(fs) != 1 || fs[0].ID != SendBufferLimited || fs[0].Title != "The senders of → 10.0.0.9:9000 wait for room in their send buffers 83% of their busy time (Send-Q 128.0 KiB)" {
		t.Fatalf("got %+v", fs)
	}
	if text := strings.Join(evidenceTexts(fs[0]), "\n"); !strings.Contains(text, "net.ipv4.tcp_wmem = 4096 16384 65536") || !strings.Contains(text, "the buffer full in 5 of 6 looks") {
		t.Errorf("evidence:\n%s", text)
	}
}
