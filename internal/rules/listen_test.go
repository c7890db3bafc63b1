package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// nginxFull is the listener of kernel-evidence fault 1: nginx with
// backlog=10, caught with its accept queue overflowing.
var nginxFull = evidence.Listener{Proto: "tcp", Addr: "10.77.0.2:80", Port: 80, RecvQ: 11, SendQ: 10, Inode: 7, PIDs: []int{3677}, Process: "nginx"}

// phpTen is php-fpm with listen.backlog = 10, busy but not full.
var phpTen = evidence.Listener{Proto: "tcp", Addr: "127.0.0.1:9000", Port: 9000, RecvQ: 7, SendQ: 10, Inode: 8, PIDs: []int{200, 201}, Process: "php-fpm8.2"}

var _ = addTable("checkListen", checkListen, listenCases)

func listenCases() []ruleCase {
	nginxIdle := nginxFull
	nginxIdle.RecvQ = 0
	nginxBusy := nginxFull
	nginxBusy.RecvQ, nginxBusy.SendQ = 400, 511
	nginxAtLimit := nginxFull
	nginxAtLimit.RecvQ = 10
	mock := evidence.Listener{Proto: "tcp6", Addr: "[::]:5000", Port: 5000, SendQ: 50, Inode: 9, PIDs: []int{4242}, Process: "java"}
	unixTiny := evidence.Listener{Proto: "unix", Addr: "/run/php/php-fpm.sock", SendQ: 10, Inode: 10, PIDs: []int{200}, Process: "php-fpm8.2"}
	noOwner := evidence.Listener{Proto: "tcp", Addr: "0.0.0.0:8080", Port: 8080, RecvQ: 0, SendQ: 20}
	php4096 := evidence.Listener{Proto: "tcp", Addr: "127.0.0.1:9000", Port: 9000, SendQ: 4096}
	synFlood := "TCP: request_sock_TCP: Possible SYN flooding on port 10.77.0.2:80. Dropping request.  Check SNMP counters."
	synCookies := "TCP: request_sock_TCP: Possible SYN flooding on port 10.77.0.2:80. Sending cookies."
	halfOpen := func(n int) func(*evidence.Snapshot) {
		return func(s *evidence.Snapshot) { s.Sockets.TCP["SYN_RECV"] = n }
	}

	return []ruleCase{
		{
			name:   "healthy",
			bundle: bundle(nil, nil),
		},
		{
			name: "accept queue full and ListenOverflows rising (fault 1)",
			bundle: bundle(listeners(nginxIdle), all(listeners(nginxFull),
				raise(117, "TcpExt.ListenOverflows", "TcpExt.ListenDrops"))),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{
					"TcpExtListenOverflows +117 in 1s (117.0/s)",
					"TcpExtListenDrops +117",
					"listener 10.77.0.2:80 (nginx pid 3677): accept queue 11 of 10 — full",
					"effective backlog 10 = the application's listen() backlog (net.core.somaxconn is 4096)",
				}}},
		},
		{
			name: "somaxconn caps the backlog (seed 000 stage 3)",
			bundle: bundle(all(setSysctl("net.core.somaxconn", "10"), listeners(nginxFull, phpTen)),
				all(setSysctl("net.core.somaxconn", "10"), listeners(nginxAtLimit, phpTen), raise(622, "TcpExt.ListenOverflows"))),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{
					"TcpExtListenOverflows +622",
					"accept queue 11 of 10 — full",
					"effective backlog 10 = net.core.somaxconn 10",
				}}},
		},
		{
			name:   "full queue sampled once, no counter rise",
			bundle: bundle(listeners(nginxFull), listeners(nginxIdle)),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{"accept queue 11 of 10 — full"}}},
		},
		{
			name: "counter rose, no sample full: the smallest backlog is named",
			bundle: bundle(nil, all(raise(3104, "TcpExt.ListenOverflows"),
				listeners(nginxBusy, phpTen, unixTiny))),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "127.0.0.1:9000",
				Evidence: []string{
					"TcpExtListenOverflows +3104",
					"smallest backlog: listener 127.0.0.1:9000 (php-fpm8.2 pid 200,201), effective backlog 10",
				}}},
		},
		{
			name:   "counter rose, no listeners at all",
			bundle: bundle(nil, all(raise(5, "TcpExt.ListenOverflows"), listeners())),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"TcpExtListenOverflows +5"}}},
		},
		{
			name:   "tiny application backlog (seed 003)",
			bundle: bundle(nil, listeners(nginxBusy, mock, unixTiny)),
			want: []want{{ID: "accept-queue-overflow", Status: report.Latent, Severity: report.Warning, Subject: "[::]:5000",
				Evidence: []string{"listener [::]:5000 (java pid 4242): accept queue 0 of 50; effective backlog 50 = the application's listen() backlog"}}},
		},
		{
			name:   "tiny backlogs, each listener once",
			bundle: bundle(nil, listeners(mock, noOwner)),
			want: []want{
				{ID: "accept-queue-overflow", Status: report.Latent, Severity: report.Warning, Subject: "[::]:5000", Evidence: []string{"accept queue 0 of 50"}},
				{ID: "accept-queue-overflow", Status: report.Latent, Severity: report.Warning, Subject: "0.0.0.0:8080", Evidence: []string{"listener 0.0.0.0:8080 (owner unknown): accept queue 0 of 20"}},
			},
		},
		{
			name:   "queue at its limit counts as full (seed 000: Recv-Q 10, Send-Q 10)",
			bundle: bundle(nil, listeners(nginxAtLimit)),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{"accept queue 10 of 10 — at its limit"}}},
		},
		{
			name:   "busy listener below its backlog",
			bundle: bundle(listeners(nginxBusy), listeners(nginxBusy)),
		},
		{
			name:   "tiny unix socket backlog is not a TCP listener",
			bundle: bundle(nil, listeners(unixTiny)),
		},
		{
			name: "SYN queue drops with syncookies off (fault 2)",
			bundle: bundle(setSysctl("net.ipv4.tcp_syncookies", "0"), all(setSysctl("net.ipv4.tcp_syncookies", "0"),
				raise(4941, "TcpExt.TCPReqQFullDrop", "TcpExt.ListenDrops"), halfOpen(512), kmsgs("syn-flooding", synFlood))),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Critical,
				Evidence: []string{
					"TcpExtTCPReqQFullDrop +4941 in 1s",
					"kernel: " + synFlood,
					"512 half-open (SYN_RECV) sockets at the end of the window",
					"net.ipv4.tcp_syncookies = 0",
				}}},
		},
		{
			// Measured in the lab's syn-flood (hping3, tcp_max_syn_backlog
			// 256): 193 SYN_RECV, only ListenDrops counts the drops.
			name: "SYNs dropped early with syncookies off, before the queue is full (seed 001 §6)",
			bundle: bundle(all(setSysctl("net.ipv4.tcp_syncookies", "0"), setSysctl("net.ipv4.tcp_max_syn_backlog", "256")),
				all(setSysctl("net.ipv4.tcp_syncookies", "0"), setSysctl("net.ipv4.tcp_max_syn_backlog", "256"),
					raise(1618, "TcpExt.ListenDrops"), halfOpen(193))),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Critical,
				Evidence: []string{
					"TcpExtListenDrops +1618 in 1s (1618.0/s), of which accept-queue overflows 0: the rest are SYNs dropped",
					"193 half-open (SYN_RECV) connections at the peak, tcp_max_syn_backlog 256",
					"net.ipv4.tcp_syncookies = 0",
				}}},
		},
		{
			// The same drops with cookies on are something else (and
			// ListenDrops alone says nothing about SYNs).
			name:   "ListenDrops with syncookies on are not early SYN drops",
			bundle: bundle(setSysctl("net.ipv4.tcp_max_syn_backlog", "256"), all(setSysctl("net.ipv4.tcp_max_syn_backlog", "256"), raise(1618, "TcpExt.ListenDrops"), halfOpen(193))),
		},
		{
			name:   "a single dropped SYN is critical",
			bundle: bundle(nil, raise(1, "TcpExt.TCPReqQFullDrop")),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Critical,
				Evidence: []string{"TcpExtTCPReqQFullDrop +1 in 1s"}}},
		},
		{
			name:   "SYN cookies sent (seed 000, fault 1)",
			bundle: bundle(nil, raise(544, "TcpExt.TCPReqQFullDoCookies")),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"TcpExtTCPReqQFullDoCookies +544", "SYN cookies answered instead of queueing"}}},
		},
		{
			name:   "SYN flooding kernel message only (seed 004)",
			bundle: bundle(nil, kmsgs("syn-flooding", "TCP: request_sock_TCP: Possible SYN flooding on port 80. Sending cookies.")),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"kernel: TCP: request_sock_TCP: Possible SYN flooding on port 80. Sending cookies."}}},
		},
		{
			name: "SYN flooding on a port that listens here",
			bundle: bundle(nil, messages(evidence.KernelMsg{Class: "syn-flooding", Port: 80,
				Text: "TCP: request_sock_TCP: Possible SYN flooding on port 0.0.0.0:80. Sending cookies."})),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"Possible SYN flooding on port 0.0.0.0:80"}}},
		},
		{
			name: "SYN flooding message that names no port is kept",
			bundle: bundle(listeners(php4096), all(listeners(php4096),
				messages(evidence.KernelMsg{Class: "syn-flooding",
					Text: "TCP: request_sock_TCP: Possible SYN flooding on port ?. Sending cookies."}))),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"Possible SYN flooding on port ?"}}},
		},
		{
			name: "SYN flooding on a port of another namespace",
			bundle: bundle(nil, messages(evidence.KernelMsg{Class: "syn-flooding", Port: 8443,
				Text: "TCP: request_sock_TCP: Possible SYN flooding on port 10.1.0.2:8443. Sending cookies."})),
		},
		{
			// The same port at another namespace's address (a neighbour
			// lab's listener at 10.99.155.1:80 beside this one's
			// 0.0.0.0:80): the socket, not the port number, says whose.
			name: "SYN flooding on the same port at another namespace's address",
			bundle: bundle(nil, messages(evidence.KernelMsg{Class: "syn-flooding", Port: 80, Addr: "10.99.155.1",
				Text: "TCP: request_sock_TCP: Possible SYN flooding on port 10.99.155.1:80. Sending cookies."})),
		},
		{
			name: "SYN flooding on this namespace's wildcard listener",
			bundle: bundle(nil, messages(evidence.KernelMsg{Class: "syn-flooding", Port: 80, Addr: "::",
				Text: "TCP: request_sock_TCP: Possible SYN flooding on port [::]:80. Sending cookies."})),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"Possible SYN flooding on port [::]:80"}}},
		},
		{
			name:   "many SYN flooding messages are summarised",
			bundle: bundle(kmsgs("syn-flooding", synCookies, synCookies), kmsgs("syn-flooding", synCookies, synCookies, synCookies)),
			want: []want{{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning,
				Evidence: []string{"… and 2 more such kernel messages"}}},
		},
		{
			name: "accept and SYN queues overflow together",
			bundle: bundle(nil, all(listeners(nginxFull), raise(3104, "TcpExt.ListenOverflows"),
				raise(544, "TcpExt.TCPReqQFullDoCookies"))),
			want: []want{
				{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80", Evidence: []string{"+3104", "accept queue 11 of 10"}},
				{ID: "syn-queue-overflow", Status: report.Active, Severity: report.Warning, Evidence: []string{"+544"}},
			},
		},
		{
			name:   "unrelated kernel messages",
			bundle: bundle(nil, kmsgs("timewait-overflow", "TCP: time wait bucket table overflow")),
		},
		{
			name: "counters went backwards",
			bundle: bundle(raise(5000, "TcpExt.ListenOverflows", "TcpExt.TCPReqQFullDrop", "TcpExt.TCPReqQFullDoCookies"),
				raise(10, "TcpExt.ListenOverflows", "TcpExt.TCPReqQFullDrop", "TcpExt.TCPReqQFullDoCookies")),
		},
		{
			name: "counters missing from the first snapshot",
			bundle: bundle(func(s *evidence.Snapshot) { s.Counters = nil },
				raise(100, "TcpExt.ListenOverflows", "TcpExt.TCPReqQFullDrop")),
		},
		{
			name:   "one snapshot, healthy",
			bundle: single(nil),
		},
		{
			name:   "one snapshot with a full queue",
			bundle: single(listeners(nginxFull)),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{"accept queue 11 of 10 — full"}}},
		},
		{
			name:   "one snapshot with a SYN flooding message needs a window",
			bundle: single(kmsgs("syn-flooding", synCookies)),
		},
		{
			name:   "no socket dump",
			bundle: bundle(func(s *evidence.Snapshot) { s.Sockets = nil }, func(s *evidence.Snapshot) { s.Sockets = nil }),
		},
		{
			name:   "no socket dump in the first snapshot",
			bundle: bundle(func(s *evidence.Snapshot) { s.Sockets = nil }, listeners(nginxFull)),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{"accept queue 11 of 10"}}},
		},
		{
			name: "no sysctls",
			bundle: bundle(func(s *evidence.Snapshot) { s.Sysctls = nil },
				all(func(s *evidence.Snapshot) { s.Sysctls = nil }, listeners(nginxFull), raise(117, "TcpExt.ListenOverflows"))),
			want: []want{{ID: "accept-queue-overflow", Status: report.Active, Severity: report.Critical, Subject: "10.77.0.2:80",
				Evidence: []string{"TcpExtListenOverflows +117", "accept queue 11 of 10 — full"}}},
		},
	}
}

func TestCheckListen(t *testing.T) {
	runCases(t, "checkListen", checkListen, listenCases())
}

// TestListenFix checks that the fix names the application's backlog, and
// somaxconn only when it is below 4096.
func TestListenFix(t *testing.T) {
	tests := []struct {
		name       string
		somaxconn  string
		wantSysctl bool
	}{
		{"somaxconn default", "4096", false},
		{"somaxconn tiny", "10", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := bundle(nil, all(setSysctl("net.core.somaxconn", tt.somaxconn), listeners(nginxFull)))
			got := checkListen(on(b))
			if len(got) != 1 {
				t.Fatalf("checkListen(on()) = %d findings, want 1", len(got))
			}
			if !hasFix(got[0], "nginx: `listen 80 backlog=4096;`") || !hasFix(got[0], "10.77.0.2:80 (nginx pid 3677)") {
				t.Errorf("checkListen(on()) fix does not name the application's backlog: %q", fixOf(got[0]))
			}
			if g := hasFix(got[0], sysctlFix(b, "net.core.somaxconn", "4096").Lines[0]); g != tt.wantSysctl {
				t.Errorf("checkListen(on()) fix raises somaxconn = %v, want %v: %q", g, tt.wantSysctl, fixOf(got[0]))
			}
		})
	}
}

// TestSynFixSyncookies checks that turning syncookies on is advised only
// when they are off.
func TestSynFixSyncookies(t *testing.T) {
	for _, v := range []string{"0", "1"} {
		b := bundle(nil, all(setSysctl("net.ipv4.tcp_syncookies", v), raise(10, "TcpExt.TCPReqQFullDrop")))
		got := checkListen(on(b))
		if len(got) != 1 || got[0].ID != "syn-queue-overflow" {
			t.Fatalf("tcp_syncookies=%s: checkListen(on()) = %v, want one syn-queue-overflow", v, keys(got))
		}
		want := v == "0"
		if g := hasFix(got[0], sysctlFix(b, "net.ipv4.tcp_syncookies", "1").Lines[0]); g != want {
			t.Errorf("tcp_syncookies=%s: fix turns syncookies on = %v, want %v", v, g, want)
		}
	}
}

// TestAcceptOverflowEvidence compares the whole evidence of the fault-1
// finding.
func TestAcceptOverflowEvidence(t *testing.T) {
	b := bundle(nil, all(listeners(nginxFull), raise(117, "TcpExt.ListenOverflows")))
	got := checkListen(on(b))
	if len(got) != 1 {
		t.Fatalf("checkListen(on()) = %v, want one finding", keys(got))
	}
	want := []report.Item{
		{Text: "TcpExtListenOverflows +117 in 1s (117.0/s)", Source: "TcpExtListenOverflows", Window: true},
		{Text: "listener 10.77.0.2:80 (nginx pid 3677): accept queue 11 of 10 — full; effective backlog 10 = the application's listen() backlog (net.core.somaxconn is 4096)",
			Source: "sockdiag", Window: true},
	}
	if diff := cmp.Diff(want, got[0].Evidence); diff != "" {
		t.Errorf("checkListen(on()) evidence mismatch (-want +got):\n%s", diff)
	}
}

// TestSynFloodMessagesCapped checks that at most three SYN flooding
// messages are quoted, followed by a count of the rest.
func TestSynFloodMessagesCapped(t *testing.T) {
	msg := "TCP: request_sock_TCP: Possible SYN flooding on port 10.77.0.2:80. Sending cookies."
	b := bundle(kmsgs("syn-flooding", msg, msg), kmsgs("syn-flooding", msg, msg, msg))
	got := checkListen(on(b))
	if len(got) != 1 {
		t.Fatalf("checkListen(on()) = %v, want one finding", keys(got))
	}
	var texts []string
	for _, it := range got[0].Evidence {
		if it.Source == "kmsg" {
			texts = append(texts, it.Text)
		}
	}
	want := []string{"kernel: " + msg, "kernel: " + msg, "kernel: " + msg, "… and 2 more such kernel messages"}
	if diff := cmp.Diff(want, texts); diff != "" {
		t.Errorf("checkListen(on()) kernel evidence mismatch (-want +got):\n%s", diff)
	}
}

// TestBacklogFromLoad: the kernel-only rule cannot know that the load
// opens 3000 connections at once; run does, and its advice for the
// overflowing nginx listener is sized as tune plan sizes it (3000,
// doubled, a power of two: 8192) in every line, the sysctl, the reason
// and nginx's listen directive, with nothing left of the rule's 4096.
func TestBacklogFromLoad(t *testing.T) {
	start := time.Unix(1000, 0)
	snap := func(at time.Duration, opens uint64) evidence.Snapshot {
		return evidence.Snapshot{Time: start.Add(at),
			Sysctls:  map[string]string{"net.core.somaxconn": "511"},
			Counters: map[string]uint64{"Tcp.PassiveOpens": opens},
			Sockets: &evidence.Sockets{Listeners: []evidence.Listener{
				{Proto: "tcp", Addr: "10.0.0.1:80", Port: 80, RecvQ: 512, SendQ: 511, PIDs: []int{7}, Process: "nginx"}}}}
	}
	b := &evidence.Bundle{Version: evidence.BundleVersion, Start: start,
		Snapshots: []evidence.Snapshot{snap(0, 0), snap(time.Second, 1000)}}
	r := &evidence.Run{LoadStart: start, LoadEnd: start.Add(time.Second),
		Load:  &load.Result{Connections: 3000, Requests: 1000, Latency: load.Latency{P99: 300 * time.Millisecond}},
		Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}},
		Servers: []*app.Server{{Kind: "nginx", Addr: "10.0.0.1:80", PIDs: []int{7},
			Nginx: &app.NginxInfo{Listens: []app.NginxListen{{Addr: "10.0.0.1:80", Backlog: -1, Source: "/etc/nginx/nginx.conf:12"}}}}}}
	find := func(fs []report.Finding) *report.Finding {
		for i := range fs {
			if fs[i].ID == AcceptQueueOverflow {
				return &fs[i]
			}
		}
		t.Fatalf("no accept-queue-overflow in %+v", fs)
		return nil
	}
	if f := find(checkListen(on(b))); !strings.Contains(strings.Join(fixOf(*f), "\n"), "to 4096") {
		t.Fatalf("the rule alone, without the load, should propose the default 4096: %q", fixOf(*f))
	}
	f := find(checkListen(&Input{Bundle: b, Side: report.Server, Run: r}))
	fix := strings.Join(fixOf(*f), "\n")
	for _, want := range []string{"sysctl -w net.core.somaxconn=8192", "a burst of 3000 connections opened at once and 1000 new connections/s arriving for 300 ms (the load's p99",
		"`listen 10.0.0.1:80 backlog=8192;` at /etc/nginx/nginx.conf:12"} {
		if !strings.Contains(fix, want) {
			t.Errorf("fix lacks %q:\n%s", want, fix)
		}
	}
	if strings.Contains(fix, "=4096") || strings.Contains(fix, "to 4096") || strings.Contains(fix, "backlog=4096") {
		t.Errorf("the rule's load-less 4096 is left in the fix:\n%s", fix)
	}
}

// TestListenFixRuntime: the fix names the setting of what serves the
// listener — Python's request_queue_size for a python3 server, a restart
// after somaxconn for a Go program — and never nginx's or php-fpm's
// syntax for them; the action comes first, the reason on its line.
func TestListenFixRuntime(t *testing.T) {
	py := evidence.Listener{Proto: "tcp", Addr: "127.0.0.1:8000", Port: 8000, RecvQ: 6, SendQ: 5, PIDs: []int{4242}, Process: "python3"}
	b := bundle(nil, all(listeners(py), raise(50, "TcpExt.ListenOverflows", "TcpExt.ListenDrops")))
	fix := fixOf(checkListen(on(b))[0])
	if !strings.HasPrefix(fix[0], "raise the listen() backlog of 127.0.0.1:8000 (python3 pid 4242) to 4096 — Python: socketserver's (and http.server's) `request_queue_size = 4096`") ||
		!strings.Contains(fix[0], "  (why 4096: ") {
		t.Errorf("python3: first line %q, want the action, then why", fix[0])
	}
	for _, l := range fix {
		if strings.Contains(l, "nginx") || strings.Contains(l, "php-fpm") || strings.HasPrefix(l, "why") {
			t.Errorf("python3's fix says %q", l)
		}
	}

	goSrv := evidence.Listener{Proto: "tcp", Addr: "127.0.0.1:8080", Port: 8080, RecvQ: 129, SendQ: 128, PIDs: []int{77}, Process: "api"}
	b = bundle(nil, all(setSysctl("net.core.somaxconn", "128"), listeners(goSrv), raise(50, "TcpExt.ListenOverflows", "TcpExt.ListenDrops")))
	in := serverRun(b, &app.Server{Role: "front", Addr: "127.0.0.1:8080", Kind: "api", Runtime: &app.Runtime{Name: app.RuntimeGo}, PIDs: []int{77}})
	in.Run.Port = "8080"
	fix = fixOf(checkListen(in)[0])
	if !strings.HasPrefix(fix[0], "sysctl -w net.core.somaxconn=4096  (why 4096: ") {
		t.Errorf("Go: first line %q, want somaxconn raised with its why", fix[0])
	}
	if s := strings.Join(fix, "\n"); !strings.Contains(s, "Go asks listen() for net.core.somaxconn as it was when it first listened (the socket has 128): restart it") || strings.Contains(s, "nginx") {
		t.Errorf("Go's fix:\n%s", s)
	}
}

// TestListenerArrivals: a service sized from its own listener's
// evidence, on a host where another service takes far more connections:
// the run's load took 330 connections/s from it and its own drop counter
// rose by 100/s, while the namespace's Tcp.PassiveOpens counted 12000/s,
// most of them the other service's. Without a load (check), its accepted
// connections cannot be told apart, and the fix says so.
func TestListenerArrivals(t *testing.T) {
	slow := evidence.Listener{Proto: "tcp", Addr: "127.0.0.1:8000", Port: 8000, RecvQ: 6, SendQ: 5, PIDs: []int{4242}, Process: "python3"}
	busy := evidence.Listener{Proto: "tcp", Addr: "127.0.0.1:9000", Port: 9000, RecvQ: 3, SendQ: 1024, PIDs: []int{4343}, Process: "python3"}
	start := time.Unix(1000, 0)
	snap := func(at int, drops, opens uint64) evidence.Snapshot {
		s := slow
		s.Drops = drops
		return evidence.Snapshot{Time: start.Add(time.Duration(at) * time.Second),
			Sysctls:  map[string]string{"net.core.somaxconn": "4096"},
			Counters: map[string]uint64{"Tcp.PassiveOpens": opens, "TcpExt.ListenOverflows": drops, "TcpExt.ListenDrops": drops},
			Sockets:  &evidence.Sockets{Listeners: []evidence.Listener{s, busy}}}
	}
	b := &evidence.Bundle{Version: evidence.BundleVersion, Start: start,
		Snapshots: []evidence.Snapshot{snap(0, 1000, 500000), snap(3, 1300, 536000)}}
	r := &evidence.Run{LoadStart: start, LoadEnd: start.Add(3 * time.Second), Port: "8000",
		Load:    &load.Result{Connections: 100, ConnectionsOpened: 990, Elapsed: 3 * time.Second, Requests: 990, Status: map[string]uint64{"2xx": 990}},
		Sides:   []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}},
		Servers: []*app.Server{{Role: "front", Kind: "python3", Runtime: &app.Runtime{Name: app.RuntimePython}, Addr: "127.0.0.1:8000", PIDs: []int{4242}}}}
	f := checkListen(&Input{Bundle: b, Side: report.Server, Run: r})[0]
	fix := strings.Join(fixOf(f), "\n")
	for _, want := range []string{"430 new connections/s arriving", "330/s accepted: the load's 990 connections in 3.0s", "100/s dropped, by its own count"} {
		if !strings.Contains(fix, want) {
			t.Errorf("run: fix lacks %q:\n%s", want, fix)
		}
	}
	if strings.Contains(fix, "12000") || strings.Contains(fix, "12100") {
		t.Errorf("run: the namespace's connections are given to one service:\n%s", fix)
	}
	if f.Subject != "127.0.0.1:8000" || !hasEvidence(f, "listener 127.0.0.1:8000 (python3 pid 4242) dropped 300 connections in 3s (100.0/s; its own drop counter") {
		t.Errorf("run: subject %q, evidence %+v", f.Subject, f.Evidence)
	}

	f = checkListen(on(b))[0]
	fix = strings.Join(fixOf(f), "\n")
	if !strings.Contains(fix, "100 new connections/s arriving") || !strings.Contains(fix, "its accepted ones uncounted: the namespace's 12000/s new connections are shared by 2 TCP listeners") {
		t.Errorf("check: fix:\n%s", fix)
	}
}

// TestOverflowPerListener: where each listener counts its own drops, a
// finding for each that dropped or filled, about it alone and sized from
// its own drops, the one that dropped most first: a busy neighbour that
// filled once is not the subject of the service that dropped hundreds.
func TestOverflowPerListener(t *testing.T) {
	start := time.Unix(1000, 0)
	snap := func(at int, goDrops, busyDrops uint64, busyQueue uint32) evidence.Snapshot {
		return evidence.Snapshot{Time: start.Add(time.Duration(at) * time.Second),
			Sysctls:  map[string]string{"net.core.somaxconn": "16"},
			Counters: map[string]uint64{"Tcp.PassiveOpens": uint64(at) * 9000, "TcpExt.ListenOverflows": goDrops + busyDrops, "TcpExt.ListenDrops": goDrops + busyDrops},
			Sockets: &evidence.Sockets{Listeners: []evidence.Listener{
				{Proto: "tcp", Addr: "127.0.0.1:8100", Port: 8100, SendQ: 16, Drops: goDrops, PIDs: []int{10}, Process: "api"},
				{Proto: "tcp", Addr: "127.0.0.1:9000", Port: 9000, RecvQ: busyQueue, SendQ: 16, Drops: busyDrops, PIDs: []int{20}, Process: "busy"}}}}
	}
	b := &evidence.Bundle{Version: evidence.BundleVersion, Start: start,
		Snapshots: []evidence.Snapshot{snap(0, 0, 0, 0), snap(2, 300, 4, 17), snap(5, 427, 15, 3)}}
	fs := checkListen(on(b))
	if len(fs) != 2 || fs[0].Subject != "127.0.0.1:8100" || fs[1].Subject != "127.0.0.1:9000" {
		t.Fatalf("findings %v, want 127.0.0.1:8100 (427 drops) then 127.0.0.1:9000 (15, full once)", keys(fs))
	}
	if !hasEvidence(fs[0], "listener 127.0.0.1:8100 (api pid 10) dropped 427 connections") || hasEvidence(fs[0], "127.0.0.1:9000") {
		t.Errorf("8100's evidence: %q", evidenceTexts(fs[0]))
	}
	if !hasEvidence(fs[1], "listener 127.0.0.1:9000 (busy pid 20): accept queue 17 of 16 — full") || !hasEvidence(fs[1], "dropped 15 connections") {
		t.Errorf("9000's evidence: %q", evidenceTexts(fs[1]))
	}
	if fix := strings.Join(fixOf(fs[0]), "\n"); !strings.Contains(fix, "85/s dropped, by its own count") {
		t.Errorf("8100 not sized from its own drops:\n%s", fix)
	}
}
