package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// socketRun is a run of 20 answers a second for 5 s from an nginx whose
// one worker idles, the server's senders of port 80 accounted each
// second as per says for one second's answers (cumulative in the
// snapshots), the server's tcp_slow_start_after_idle as given, and the
// load's p50 and mean as given.
func socketRun(per evidence.SenderCounters, afterIdle string, p50 time.Duration) *Input {
	s := &app.Server{Role: "front", Kind: "nginx", Addr: "10.0.0.1:80", Runtime: &app.Runtime{Name: app.RuntimeNginx, Parallelism: 1}}
	idle := app.CPU{Span: time.Second, Threads: 1, ThreadTime: time.Second, OnCPU: 5 * time.Millisecond, CPUs: 2, IdleCPUs: 1.9}
	in := cpuRun(s, idle, map[string]int{app.WaitIdle: 1})
	lr := in.Run.Load
	lr.Requests = 100
	lr.Latency = load.Latency{Mean: p50 + p50/10, P50: p50, P99: 2 * p50}
	for i := range lr.Timeline {
		lr.Timeline[i].Requests, lr.Timeline[i].P50, lr.Timeline[i].P99 = 20, p50, 2*p50
	}
	b := &evidence.Bundle{Version: evidence.BundleVersion, Host: evidence.Host{Hostname: "web1", CPUs: 2, UserHZ: 100, NetNS: "srv"}, Start: in.Run.LoadStart}
	var sum evidence.SenderCounters
	for i := range 6 {
		snap := healthy(in.Run.LoadStart.Add(time.Duration(i) * time.Second))
		snap.Sysctls["net.ipv4.tcp_slow_start_after_idle"] = afterIdle
		snap.CPU[0].User += uint64(i) * 20 // the host's CPUs idle 90 %
		snap.CPU[0].Idle += uint64(i) * 180
		if i > 0 {
			sum.Add(per)
		}
		g := evidence.SenderGroup{Port: 80, Since: in.Run.LoadStart.Add(-time.Second), Open: 4, Cong: map[string]int{"cubic": 4}, SenderCounters: sum}
		snap.Senders = &evidence.Senders{Since: b.Start, Listeners: []evidence.SenderGroup{g}}
		b.Snapshots = append(b.Snapshots, snap)
	}
	in.Run.Sides[0].Bundle, in.Bundle = b, b
	return in
}

// answers is a second's accounting of 20 answers of busy time each,
// min_rtt 50 ms, restarted of them restarted after idle from a window
// of 300 segments, and sndbuf of the busy time held by the send buffer.
func answers(busy time.Duration, restarted uint64, sndbuf time.Duration) evidence.SenderCounters {
	return evidence.SenderCounters{BusyUS: 20 * uint64(busy/time.Microsecond), SndbufLimitedUS: 20 * uint64(sndbuf/time.Microsecond),
		Looks: 10, MinRTTSumUS: 10 * 50000, RTTSumUS: 10 * 52000, IdleResumes: 20, Restarts: restarted, RestartCwndSum: 300 * restarted,
		BytesSent: 20 * 512 << 10, BytesAcked: 20 * 512 << 10}
}

// TestSocketTime: answers held by windows the kernel restarted after
// idle are named, with tcp_slow_start_after_idle, from the time split;
// with the sysctl at 0, or no restart (BBR), or answers that take one
// round trip (a long RTT), nothing is; answers held by the send buffer
// are named as such. app-slow ("while the CPU idles") is not made
// beside a finding the accounting supports.
func TestSocketTime(t *testing.T) {
	for _, tc := range []struct {
		name      string
		in        *Input
		id        report.FindingID
		title     string
		evidence  []string
		sysctlFix bool
	}{
		{"cubic restarts", socketRun(answers(300*time.Millisecond, 19, 0), "1", 310*time.Millisecond), CwndRestartAfterIdle,
			"tcp_slow_start_after_idle restarts cubic's window",
			[]string{"held by the congestion window restarted after idle", "95 of 100 answers sent after an idle longer than the RTO restarted their window, from 300 segments on average to the initial 10: about 5 round trips of 50.00ms",
				"net.ipv4.tcp_slow_start_after_idle = 1 on the server; its connections' congestion control: cubic ×4"}, true},
		{"sysctl 0", socketRun(answers(300*time.Millisecond, 19, 0), "0", 310*time.Millisecond), "", "", nil, false},
		{"bbr: no restart", socketRun(answers(300*time.Millisecond, 0, 0), "1", 310*time.Millisecond), "", "", nil, false},
		{"long rtt", socketRun(answers(52*time.Millisecond, 0, 0), "1", 55*time.Millisecond), "", "", nil, false},
		{"send buffer", socketRun(answers(300*time.Millisecond, 0, 200*time.Millisecond), "1", 310*time.Millisecond), SendBufferLimited,
			"Answers wait for room in the server's send buffers", []string{"held by the send buffer"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := checkSocketTime(tc.in)
			if tc.id == SendBufferLimited {
				fs = checkRwnd(tc.in) // the rule that judges the senders' buffers
			}
			all, _ := Diagnose(tc.in.Run)
			for _, f := range all {
				if f.ID == AppSlow {
					t.Errorf("app-slow where the answers' time was in the sockets: %s", f.Title)
				}
			}
			if tc.id == "" {
				if len(fs) > 0 {
					t.Fatalf("found %s: %s", fs[0].ID, fs[0].Title)
				}
				return
			}
			if len(fs) != 1 || fs[0].ID != tc.id || !strings.Contains(fs[0].Title, tc.title) {
				t.Fatalf("got %+v, want %s %q", fs, tc.id, tc.title)
			}
			text := strings.Join(evidenceTexts(fs[0]), "\n")
			for _, e := range tc.evidence {
				if !strings.Contains(text, e) {
					t.Errorf("evidence lacks %q:\n%s", e, text)
				}
			}
			if tc.sysctlFix && (len(fs[0].Actions) == 0 || fs[0].Actions[0].Setting != slowStartAfterIdle || fs[0].Actions[0].Value != "0") {
				t.Errorf("fix %+v, want %s = 0 first", fs[0].Actions, slowStartAfterIdle)
			}
		})
	}
}
