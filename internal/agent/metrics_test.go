package agent

import (
	"context"
	"fmt"
	"net"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/evidence"
)

// TestMetricsSeries: /metrics carries each listener once (two
// SO_REUSEPORT sockets of one address add their queues and drops), each
// destination's connections and local ports against the range,
// conntrack's table and drops, and the resolver probes' latency and
// loss; every name passes client_golang's lint.
func TestMetricsSeries(t *testing.T) {
	a := newTestAgent(t, Config{Recent: 3 * time.Second})
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	s := fixture(t).Snapshots[0]
	s.Sockets = &evidence.Sockets{
		TCP: map[string]int{"LISTEN": 2},
		Listeners: []evidence.Listener{
			{Proto: "tcp", Addr: "0.0.0.0:80", Port: 80, RecvQ: 3, SendQ: 511, Drops: 7, Established: 40, Unread: 5, CloseWait: 2, Process: "nginx"},
			{Proto: "tcp", Addr: "0.0.0.0:80", Port: 80, RecvQ: 2, SendQ: 511, Drops: 1, Established: 40, Unread: 5, CloseWait: 2, Process: "nginx"},
			{Proto: "unix", Addr: "/run/php/www.sock", RecvQ: 9, SendQ: 8, Process: "php-fpm8.2"},
		},
		Remotes: []evidence.Remote{{Addr: "10.0.0.2:6379", Established: 10, TimeWait: 20000, Other: 1, Ephemeral: 20011}},
	}
	s.Sysctls = map[string]string{"net.ipv4.ip_local_port_range": "32768\t60999"}
	s.Conntrack = &evidence.Conntrack{Count: 900, Max: 1024, Stats: map[string]uint64{"drop": 12, "early_drop": 3, "insert_failed": 1}}
	feed(t, a, time.Now().Add(-time.Second), []evidence.Snapshot{s})
	a.dns.observe([]evidence.DNSProbe{
		{Server: "10.0.0.53:53", Type: "A", Duration: 2 * time.Millisecond, Rcode: "NOERROR"},
		{Server: "10.0.0.53:53", Type: "A", Duration: time.Second, Err: "timeout"},
	})
	_, m := get(t, srv, agentapi.PathMetrics, testToken)
	for _, want := range []string{
		`netdoctor_listener_accept_queue{listener="0.0.0.0:80",process="nginx",proto="tcp"} 5`,
		`netdoctor_listener_accept_queue_limit{listener="0.0.0.0:80",process="nginx",proto="tcp"} 1022`,
		`netdoctor_listener_drops_total{listener="0.0.0.0:80",process="nginx",proto="tcp"} 8`,
		`netdoctor_listener_connections{listener="0.0.0.0:80",process="nginx",proto="tcp",state="established"} 40`,
		`netdoctor_listener_connections{listener="0.0.0.0:80",process="nginx",proto="tcp",state="close_wait"} 2`,
		`netdoctor_listener_unread_connections{listener="0.0.0.0:80",process="nginx",proto="tcp"} 5`,
		`netdoctor_listener_accept_queue{listener="/run/php/www.sock",process="php-fpm8.2",proto="unix"} 9`,
		`netdoctor_destination_connections{destination="10.0.0.2:6379",state="time_wait"} 20000`,
		`netdoctor_destination_local_ports{destination="10.0.0.2:6379"} 20011`,
		`netdoctor_local_ports_available 28232`,
		`netdoctor_conntrack_entries 900`,
		`netdoctor_conntrack_entries_limit 1024`,
		`netdoctor_conntrack_drop_total 12`,
		`netdoctor_conntrack_early_drop_total 3`,
		`netdoctor_conntrack_insert_failed_total 1`,
		`netdoctor_resolver_probes_total{nameserver="10.0.0.53:53",type="A"} 2`,
		`netdoctor_resolver_probes_lost_total{nameserver="10.0.0.53:53",type="A"} 1`,
		`netdoctor_resolver_probe_duration_seconds_count{nameserver="10.0.0.53:53",type="A"} 1`,
	} {
		if !strings.Contains(m, want+"\n") {
			name, _, _ := strings.Cut(want, "{")
			name, _, _ = strings.Cut(name, " ")
			t.Errorf("/metrics lacks %s; has:\n%s", want, grep(m, name))
		}
	}
	if strings.Contains(m, `netdoctor_listener_connections{listener="/run/php/www.sock"`) {
		t.Errorf("a unix listener has no port connections to count:\n%s", grep(m, "www.sock"))
	}
	// The scrape's own cost is served by the next scrape.
	_, m = get(t, srv, agentapi.PathMetrics, testToken)
	if !strings.Contains(m, "netdoctor_agent_scrape_duration_seconds ") {
		t.Errorf("no scrape cost:\n%s", grep(m, "netdoctor_agent"))
	}
	problems, err := testutil.GatherAndLint(a.registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestMetricsPools: the application behind a listener is followed
// without a watch: its workers and their threads by wait are on
// /metrics, and forgotten once the listener is gone. The server is a
// python3 process; the agent's own listener (this test process's) is
// not followed.
func TestMetricsPools(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not installed")
	}
	a := newTestAgent(t, Config{})
	own, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	srv := exec.Command(py, "-c", "import socket,sys,threading;s=socket.socket();s.bind(('127.0.0.1',0));s.listen();"+
		"[threading.Thread(target=s.accept,daemon=True).start() for _ in range(3)];print(s.getsockname()[1],flush=True);sys.stdin.read()")
	stdin, _ := srv.StdinPipe()
	out, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stdin.Close(); srv.Process.Kill(); srv.Wait() }()
	var port int
	if _, err := fmt.Fscan(out, &port); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	snap, err := a.Take(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.pools.sample(ctx, snap.Sockets.Listeners)
	for _, v := range a.pools.views(time.Now(), time.Minute) {
		if v.Listener == own.Addr().String() {
			t.Errorf("the agent follows its own listener: %+v", v)
		}
	}
	var found *poolView
	for _, v := range a.pools.views(time.Now(), time.Minute) {
		if v.Listener == fmt.Sprintf("127.0.0.1:%d", port) {
			found = &v
		}
	}
	if found == nil {
		t.Fatalf("no pool for 127.0.0.1:%d in %+v (listeners %+v)", port, a.pools.views(time.Now(), time.Minute), snap.Sockets.Listeners)
	}
	threads := 0
	for _, n := range found.Sample.Waits {
		threads += n
	}
	if found.Sample.Workers != 1 || threads < 4 || found.Sample.Waits["idle"] < 3 {
		t.Errorf("%s: %d workers, %d threads (%v); want the process and its 3 threads idle in accept", found.App, found.Sample.Workers, threads, found.Sample.Waits)
	}
	problems, err := testutil.GatherAndLint(a.registry())
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
	stdin.Close()
	srv.Wait()
	snap, _ = a.Take(ctx)
	a.pools.sample(ctx, snap.Sockets.Listeners)
	for _, v := range a.pools.views(time.Now(), time.Minute) {
		if v.Listener == fmt.Sprintf("127.0.0.1:%d", port) {
			t.Errorf("the closed listener is still followed: %+v", v)
		}
	}
}

// TestMetricsDrops: the drop monitor's counts by reason and protocol,
// its own health, the sockets that dropped and the firewall's rules,
// with bounded labels; the monitor's absence is a 0, not a silence.
func TestMetricsDrops(t *testing.T) {
	a := newTestAgent(t, Config{Recent: 3 * time.Second})
	srv := httptest.NewServer(a.Handler([]byte(testToken)))
	defer srv.Close()
	s := fixture(t).Snapshots[0]
	s.Drops = &evidence.Drops{Since: time.Now(), Seen: 900, Overflow: 2,
		Counts: []evidence.Drop{
			{Reason: "NETFILTER_DROP", Location: "nft_do_chain", Proto: "tcp", Iface: "eth0", Packets: 350},
			{Reason: "NETFILTER_DROP", Location: "nf_hook_slow", Proto: "tcp", Iface: "eth1", Packets: 50},
			{Reason: "SOCKET_RCVBUFF", Location: "udp_queue_rcv_one_skb", Proto: "udp", Packets: 7},
		},
		Retrans: []evidence.Retrans{{Local: "10.0.0.1:80", Remote: "10.0.0.2:4000", Segments: 9}, {Local: "10.0.0.1:80", Remote: "10.0.0.2:4002", Segments: 1}}}
	s.Sockets = &evidence.Sockets{TCP: map[string]int{}, Listeners: []evidence.Listener{},
		Drops: []evidence.SocketDrops{{Proto: "udp", Local: "0.0.0.0:5000", Inode: 1, Drops: 1800, Process: "python3"}}}
	s.Firewall = &evidence.Firewall{Rules: []evidence.FirewallRule{
		{Family: "ip", Table: "filter", Chain: "INPUT", Text: "tcp dport 80 drop", Verdict: "drop", Counted: true, Packets: 400},
		{Family: "inet", Table: "t", Chain: "in", Text: "udp dport 9 drop", Verdict: "drop"},
	}}
	feed(t, a, time.Now().Add(-time.Second), []evidence.Snapshot{s})
	_, m := get(t, srv, agentapi.PathMetrics, testToken)
	for _, want := range []string{
		`netdoctor_drops_total{proto="tcp",reason="NETFILTER_DROP"} 400`,
		`netdoctor_drops_total{proto="udp",reason="SOCKET_RCVBUFF"} 7`,
		`netdoctor_drop_monitor_up 1`,
		`netdoctor_drop_monitor_seen_total 900`,
		`netdoctor_drop_monitor_overflow_total 2`,
		`netdoctor_retransmitted_segments_total{local="10.0.0.1:80"} 10`,
		`netdoctor_socket_drops_total{local="0.0.0.0:5000",process="python3",proto="udp"} 1800`,
		`netdoctor_firewall_rule_packets_total{chain="INPUT",family="ip",rule="tcp dport 80 drop",table="filter"} 400`,
	} {
		if !strings.Contains(m, want+"\n") {
			name, _, _ := strings.Cut(want, "{")
			name, _, _ = strings.Cut(name, " ")
			t.Errorf("/metrics lacks %s; has:\n%s", want, grep(m, name))
		}
	}
	if strings.Contains(m, `rule="udp dport 9 drop"`) {
		t.Errorf("a rule without a counter has no series")
	}
	s.Drops = &evidence.Drops{Unavailable: "not root"}
	feed(t, a, time.Now(), []evidence.Snapshot{s})
	if _, m = get(t, srv, agentapi.PathMetrics, testToken); !strings.Contains(m, "netdoctor_drop_monitor_up 0\n") || strings.Contains(m, "netdoctor_drops_total{") {
		t.Errorf("without the monitor:\n%s", grep(m, "drop"))
	}
	problems, err := testutil.GatherAndLint(a.registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestMetricsLocalView: the loopback listener without a web
// configuration, which every local user reaches, serves what such a
// user reads anyway: the listeners' and sockets' addresses, queues and
// drops without the processes that own them, the destinations,
// conntrack; not the firewall's rules, not the drop monitor's counts.
// The full view, with the same snapshot, has them all.
func TestMetricsLocalView(t *testing.T) {
	a := newTestAgent(t, Config{Recent: 3 * time.Second})
	local := httptest.NewServer(a.MetricsHandler(true))
	defer local.Close()
	full := httptest.NewServer(a.MetricsHandler(false))
	defer full.Close()
	s := fixture(t).Snapshots[0]
	s.Sockets = &evidence.Sockets{TCP: map[string]int{"LISTEN": 1},
		Listeners: []evidence.Listener{{Proto: "tcp", Addr: "0.0.0.0:80", Port: 80, RecvQ: 3, SendQ: 511, Drops: 7, Process: "secret-owner"}},
		Remotes:   []evidence.Remote{{Addr: "10.0.0.2:6379", Established: 10}},
		Drops:     []evidence.SocketDrops{{Proto: "udp", Local: "0.0.0.0:5000", Inode: 1, Drops: 1800, Process: "secret-owner"}}}
	s.Drops = &evidence.Drops{Since: time.Now(), Seen: 900, Counts: []evidence.Drop{{Reason: "NETFILTER_DROP", Proto: "tcp", Packets: 400}},
		Retrans: []evidence.Retrans{{Local: "10.0.0.1:80", Remote: "10.0.0.2:4000", Segments: 9}}}
	s.Firewall = &evidence.Firewall{Rules: []evidence.FirewallRule{{Family: "ip", Table: "filter", Chain: "INPUT", Text: "ip saddr 10.9.9.9 drop", Verdict: "drop", Counted: true, Packets: 400}}}
	s.Conntrack = &evidence.Conntrack{Count: 900, Max: 1024}
	feed(t, a, time.Now().Add(-time.Second), []evidence.Snapshot{s})
	_, all := get(t, full, agentapi.PathMetrics, "")
	_, m := get(t, local, agentapi.PathMetrics, "")
	for _, want := range []string{
		`netdoctor_listener_accept_queue{listener="0.0.0.0:80",process="",proto="tcp"} 3`,
		`netdoctor_listener_drops_total{listener="0.0.0.0:80",process="",proto="tcp"} 7`,
		`netdoctor_destination_connections{destination="10.0.0.2:6379",state="established"} 10`,
		`netdoctor_socket_drops_total{local="0.0.0.0:5000",process="",proto="udp"} 1800`,
		`netdoctor_conntrack_entries 900`,
		`netdoctor_drop_monitor_up 1`,
		`netdoctor_agent_snapshots_total`,
	} {
		if !strings.Contains(m, want) {
			name, _, _ := strings.Cut(want, "{")
			t.Errorf("the local view lacks %s; has:\n%s", want, grep(m, name))
		}
	}
	for _, leak := range []string{"secret-owner", "10.9.9.9", "netdoctor_firewall_rule_packets_total", "netdoctor_drops_total{", "netdoctor_retransmitted_segments_total{"} {
		if strings.Contains(m, leak) {
			t.Errorf("the local view shows %q:\n%s", leak, grep(m, leak))
		}
		if !strings.Contains(all, leak) {
			t.Errorf("the full view lacks %q", leak)
		}
	}
	problems, err := testutil.GatherAndLint(a.registryOf(true))
	if err != nil || len(problems) > 0 {
		t.Errorf("lint: %v %v", problems, err)
	}
}
