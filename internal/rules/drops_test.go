package rules

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// monitored returns a change that gives a snapshot the drop monitor's
// counts (since t0) and the firewall's rules.
func monitored(counts []evidence.Drop, rules ...evidence.FirewallRule) func(*evidence.Snapshot) {
	return func(s *evidence.Snapshot) {
		s.Drops = &evidence.Drops{Since: t0, Counts: counts}
		if rules != nil {
			s.Firewall = &evidence.Firewall{Rules: rules}
		}
	}
}

var (
	limitRule = evidence.FirewallRule{Family: "ip", Table: "filter", Chain: "INPUT", Hook: "input", Handle: 2,
		Text: "tcp flags syn / fin,syn,rst,ack tcp dport 80 limit rate 10/second accept", Iptables: "-A INPUT -p tcp --syn --dport 80 -m limit --limit 10/s --limit-burst 5 -j ACCEPT",
		Verdict: "accept", Limit: "10/second", Counted: true}
	dropRule = evidence.FirewallRule{Family: "ip", Table: "filter", Chain: "INPUT", Hook: "input", Handle: 3,
		Text: "tcp flags syn / fin,syn,rst,ack tcp dport 80 drop", Iptables: "-A INPUT -p tcp --syn --dport 80 -j DROP", Verdict: "drop", Counted: true}
	scanRule = evidence.FirewallRule{Family: "inet", Table: "filter", Chain: "input", Hook: "input", Handle: 7,
		Text: "tcp dport 23 drop", Verdict: "drop", Counted: true}
)

func counted(r evidence.FirewallRule, packets uint64) evidence.FirewallRule {
	r.Packets = packets
	return r
}

func nfDrop(packets uint64, port int) evidence.Drop {
	return evidence.Drop{Reason: "NETFILTER_DROP", Location: "nft_do_chain", Proto: "tcp", Iface: "eth0", Packets: packets,
		Ports: []evidence.DropPort{{Port: port, Packets: packets}}}
}

var _ = addTable("checkDrops", checkDrops, dropsCases)

func dropsCases() []ruleCase {
	return []ruleCase{
		{name: "healthy", bundle: bundle(nil, nil)},
		{name: "healthy, monitored", bundle: bundle(monitored(nil), monitored(nil))},
		{
			name: "a rate limit's excess dropped by the rule behind it, with the monitor",
			bundle: bundle(monitored([]evidence.Drop{nfDrop(10, 80)}, counted(limitRule, 100), counted(dropRule, 10)),
				monitored([]evidence.Drop{nfDrop(410, 80)}, counted(limitRule, 110), counted(dropRule, 410))),
			want: []want{{ID: FirewallDrop, Status: report.Active, Severity: report.Critical, Subject: "ip filter INPUT",
				Evidence: []string{"`tcp flags syn / fin,syn,rst,ack tcp dport 80 drop`", "iptables: `-A INPUT -p tcp --syn --dport 80 -j DROP`", "dropped 400 packets",
					"the rate limit in front of it", "limit rate 10/second accept", "NETFILTER_DROP: 400 tcp packets", "nft_do_chain on eth0 (port 80: 400)"}}},
		},
		{
			name:   "the same without the monitor: the counters alone",
			bundle: bundle(monitored(nil, counted(limitRule, 100), counted(dropRule, 10)), monitored(nil, counted(limitRule, 110), counted(dropRule, 410))),
			want: []want{{ID: FirewallDrop, Status: report.Active, Severity: report.Critical, Subject: "ip filter INPUT",
				Evidence: []string{"dropped 400 packets", "the rate limit in front of it"}}},
		},
		{
			name:   "a port scan dropped on a port nothing serves: the firewall doing its job",
			bundle: bundle(monitored([]evidence.Drop{nfDrop(0, 23)}, counted(scanRule, 0)), monitored([]evidence.Drop{nfDrop(30, 23)}, counted(scanRule, 30))),
		},
		{
			name:   "drops to a listening port, no counted rule: a ban list's work is a warning outside a run",
			bundle: bundle(monitored(nil), monitored([]evidence.Drop{nfDrop(50, 80)})),
			want: []want{{ID: FirewallDrop, Status: report.Active, Severity: report.Warning, Subject: "netfilter",
				Evidence: []string{"NETFILTER_DROP: 50 tcp packets"}}},
		},
		{
			name: "conntrack's full table is not the firewall's",
			bundle: bundle(all(monitored(nil), func(s *evidence.Snapshot) { s.Conntrack.Stats["drop"] = 0 }),
				all(monitored([]evidence.Drop{nfDrop(50, 80)}), func(s *evidence.Snapshot) { s.Conntrack.Stats["drop"] = 50 })),
		},
		{
			name: "stray drops every host has are not blamed",
			bundle: bundle(monitored(nil), monitored([]evidence.Drop{
				{Reason: "NO_SOCKET", Location: "tcp_v4_rcv", Proto: "tcp", Iface: "eth0", Packets: 500},
				{Reason: "QUEUE_PURGE", Location: "sk_stream_kill_queues", Proto: "tcp", Packets: 900},
				{Reason: "NOT_SPECIFIED", Location: "ip6_mc_input", Proto: "icmpv6", Iface: "eth0", Packets: 40},
			})),
		},
		{
			name: "a qdisc that drops without a saturated link",
			bundle: bundle(monitored(nil), monitored([]evidence.Drop{{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Proto: "tcp", Iface: "eth0", Packets: 300,
				Ports: []evidence.DropPort{{Port: 80, Socket: true, Packets: 300}}}})),
			want: []want{{ID: PacketDrops, Status: report.Active, Severity: report.Critical, Subject: "QDISC_DROP",
				Evidence: []string{"QDISC_DROP: 300 tcp packets", "by __dev_queue_xmit on eth0", "socket port 80: 300"}}},
		},
		{
			name:   "a few drops are noise",
			bundle: bundle(monitored(nil), monitored([]evidence.Drop{{Reason: "NEIGH_FAILED", Location: "neigh_invalidate", Proto: "ipv4", Iface: "eth0", Packets: 5}})),
		},
		{
			name: "owned reasons are their rules' evidence",
			bundle: bundle(monitored(nil), monitored([]evidence.Drop{{Reason: "TCP_LISTEN_OVERFLOW", Location: "tcp_v4_rcv", Proto: "tcp", Packets: 300},
				{Reason: "SOCKET_RCVBUFF", Location: "__udp_enqueue_schedule_skb", Proto: "udp", Packets: 300}})),
		},
		{
			name:   "a restarted monitor's counts are not compared",
			bundle: bundle(monitored(nil), all(monitored([]evidence.Drop{nfDrop(500, 80)}), func(s *evidence.Snapshot) { s.Drops.Since = t0.Add(1) })),
		},
	}
}

func TestCheckDrops(t *testing.T) {
	runCases(t, "checkDrops", checkDrops, dropsCases())
}

// TestFirewallFix: the rule named with its handle, how to see it, and a
// rate limit's advice sized on what arrived.
func TestFirewallFix(t *testing.T) {
	b := inNetNS(bundle(monitored(nil, counted(limitRule, 100), counted(dropRule, 10)),
		all(raise(40, "Tcp.PassiveOpens"), monitored(nil, counted(limitRule, 110), counted(dropRule, 410)))), "srv")
	f := checkDrops(on(b))[0]
	for _, want := range []string{"ip netns exec srv nft -a list chain ip filter INPUT", "the limit (10/second) is below what the service receives", "440/s",
		"iptables -S INPUT"} {
		if !hasFix(f, want) {
			t.Errorf("fix lacks %q: %q", want, f.Fix)
		}
	}
	if !strings.Contains(f.Title, "`tcp flags syn / fin,syn,rst,ack tcp dport 80 drop` (ip filter INPUT) dropped 400") {
		t.Errorf("title %q", f.Title)
	}
}

// TestDropsElsewhere: the service's packets dying in another namespace of
// the host are named with it, by flow, once in a run; another
// namespace's drops of its own flows, on the same port number, are never
// this service's (issue 36: a neighbour torn down on a container host).
func TestDropsElsewhere(t *testing.T) {
	away := evidence.FlowDrop{Reason: "QDISC_DROP", Location: "__dev_queue_xmit", Iface: "r-s", NetNS: nsRouter, NetNSName: "router",
		Flow: tcp("10.0.0.2:80", "10.0.1.1:41000"), Packets: 200}
	neighbour := evidence.FlowDrop{Reason: "IP_OUTNOROUTES", Location: "__ip_queue_xmit", NetNS: nsOther, NetNSName: "nb",
		Flow: tcp("10.9.0.1:80", "10.9.0.2:45000"), FromSocket: true, SocketPort: 80, Packets: 400}
	mine := all(monitored(nil), retrans(flow(42, 2)))
	b := bundle(monitored(nil), all(mine, ledgerElsewhere(away, neighbour)))
	run := &evidence.Run{Port: "80", Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}, {SideInfo: evidence.SideInfo{Name: report.Client, Observed: true}, Bundle: b}}}
	got := checkDrops(&Input{Bundle: b, Run: run, Side: report.Server})
	if len(got) != 1 || got[0].Subject != "netns router QDISC_DROP" || got[0].Severity != report.Critical ||
		!hasEvidence(got[0], "QDISC_DROP: 200 tcp packets of 10.0.0.2:80 → 10.0.1.1:41000 dropped in 1s by __dev_queue_xmit on r-s in network namespace router") ||
		got[0].About.DropReason != "QDISC_DROP" || got[0].About.Interface != "r-s" {
		t.Fatalf("server side: %+v", got)
	}
	if got := checkDrops(&Input{Bundle: b, Run: run, Side: report.Client}); len(got) != 0 {
		t.Errorf("the client side names it again: %+v", got)
	}
	if got := checkDrops(on(b)); len(got) != 1 || got[0].Subject != "netns router QDISC_DROP" {
		t.Errorf("check: the namespace's own flows die in another: %+v", got)
	}
	// The neighbour alone, on the same port: nothing about this service,
	// in a run or in check.
	b = bundle(monitored(nil), all(mine, ledgerElsewhere(neighbour)))
	run.Sides[0].Bundle, run.Sides[1].Bundle = b, b
	if got := checkDrops(&Input{Bundle: b, Run: run, Side: report.Server}); len(got) != 0 {
		t.Errorf("a neighbour's drops on the same port taken for the run's: %+v", got)
	}
	if got := checkDrops(on(b)); len(got) != 0 {
		t.Errorf("a neighbour's drops on the same port taken for the namespace's: %+v", got)
	}
}
