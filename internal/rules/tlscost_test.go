package rules

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
)

// libProfile is a pprof profile of nginx's worker with hot share of its
// samples in library lib's unnamed code (as Debian's stripped libcrypto
// leaves OpenSSL's assembler: "[libcrypto.so.3]"), under a named caller
// there when caller is set, the rest in nginx itself; 10 ms of CPU a
// sample.
func libProfile(t *testing.T, lib, caller string, hot int64) *cpuprof.Profile {
	t.Helper()
	lm := &profile.Mapping{ID: 1, File: "/usr/lib/x86_64-linux-gnu/" + lib, Start: 0x7f0000000000, Limit: 0x7f0000400000}
	nm := &profile.Mapping{ID: 2, File: "/usr/sbin/nginx", Start: 0x400000, Limit: 0x500000, HasFunctions: true}
	loop := &profile.Function{ID: 1, Name: "ngx_process_events_and_timers"}
	fns := []*profile.Function{loop}
	unnamed := &profile.Location{ID: 1, Mapping: lm, Address: 0x7f0000001000}
	main := &profile.Location{ID: 2, Mapping: nm, Address: 0x401000, Line: []profile.Line{{Function: loop}}}
	locs := []*profile.Location{unnamed, main}
	stack := []*profile.Location{unnamed}
	if caller != "" {
		f := &profile.Function{ID: 2, Name: caller}
		l := &profile.Location{ID: 3, Mapping: lm, Address: 0x7f0000002000, Line: []profile.Line{{Function: f}}}
		fns, locs, stack = append(fns, f), append(locs, l), append(stack, l)
	}
	stack = append(stack, main)
	labels := map[string][]string{cpuprof.LabelServer: {"nginx 10.0.0.1:443"}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Mapping:    []*profile.Mapping{lm, nm}, Function: fns, Location: locs,
		Sample: []*profile.Sample{
			{Location: stack, Value: []int64{hot, hot * 1e7}, Label: labels},
			{Location: []*profile.Location{main}, Value: []int64{100 - hot, (100 - hot) * 1e7}, Label: labels},
		},
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return &cpuprof.Profile{Hz: 99, Samples: 100, Kept: 100, Duration: 6 * time.Second, PProf: b.Bytes()}
}

// TestTLSHandshakes: one nginx worker, 90 % of its samples in
// libcrypto's unnamed code under SSL_do_handshake, while the load opens
// a connection per request, as TestRunSaturatedWorker measures it: named
// TLS handshakes with their rate and CPU each, agreeing with
// worker-saturated; the same work with keep-alive (few connections), a
// TLS share below the threshold, or the hot library zlib, is not.
func TestTLSHandshakes(t *testing.T) {
	nginx := func() *app.Server {
		return &app.Server{Role: "front", Kind: "nginx", Addr: "10.0.0.1:443",
			Runtime: &app.Runtime{Name: app.RuntimeNginx, Parallelism: 1, Source: "worker_processes 1 (/etc/nginx/nginx.conf:4)"},
			Nginx:   &app.NginxInfo{WorkerProcesses: app.Setting{Value: 1, Source: "/etc/nginx/nginx.conf:4"}}}
	}
	pegged := app.CPU{Span: time.Second, Threads: 1, ThreadTime: time.Second, OnCPU: 960 * time.Millisecond, RunDelay: 20 * time.Millisecond, CPUs: 2, IdleCPUs: 0.8}
	running := map[string]int{app.WaitRunning: 1}
	for _, tc := range []struct {
		name, lib, caller string
		hot               int64
		opened            uint64
		title             string
		profiled          time.Duration // from the load's start; 0: its window unknown
	}{
		{"handshakes, stripped libcrypto", "libcrypto.so.3", "", 90, 500, "nginx on 10.0.0.1:443 spends 90% of its CPU on TLS handshakes: 100 new connections/s, 1.8 ms of CPU each", 0},
		{"handshakes, under libssl", "libssl.so.3", "SSL_do_handshake", 80, 500, "nginx on 10.0.0.1:443 spends 80% of its CPU on TLS handshakes: 100 new connections/s, 1.6 ms of CPU each", 0},
		{"profile over half the load", "libcrypto.so.3", "", 90, 500, "nginx on 10.0.0.1:443 spends 90% of its CPU on TLS handshakes: 100 new connections/s, 3.6 ms of CPU each", 2550 * time.Millisecond},
		{"keep-alive", "libcrypto.so.3", "", 90, 16, "", 0},
		{"little TLS", "libcrypto.so.3", "", 20, 500, "", 0},
		{"compression", "libz.so.1.2.13", "", 90, 500, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := cpuRun(nginx(), pegged, running)
			in.Run.Load.ConnectionsOpened = tc.opened
			in.Run.Load.Elapsed = 5 * time.Second
			in.Run.Profile = libProfile(t, tc.lib, tc.caller, tc.hot)
			if tc.profiled > 0 {
				in.Run.Profile.Start, in.Run.Profile.Duration = in.Run.LoadStart, tc.profiled
			}
			// app-slow's advice names a hot library's role beside it.
			if adv := onCPUAdvice(in.Run, in.Run.Servers[0]); !strings.Contains(adv, fmt.Sprintf("[%s] %d%% (", tc.lib, tc.hot)) {
				t.Errorf("app-slow's advice %q does not name the library's role", adv)
			}
			fs := checkTLSHandshakes(in)
			if tc.title == "" {
				if len(fs) > 0 {
					t.Fatalf("found: %s", fs[0].Title)
				}
				return
			}
			if len(fs) != 1 || fs[0].Title != tc.title {
				t.Fatalf("got %+v, want %q", fs, tc.title)
			}
			var ev []string
			for _, it := range fs[0].Evidence {
				ev = append(ev, it.Text)
			}
			text := strings.Join(ev, "\n")
			for _, want := range []string{"[" + tc.lib + "]", "500 connections for 500 requests", "its one worker is saturated"} {
				if !strings.Contains(text, want) {
					t.Errorf("evidence lacks %q:\n%s", want, text)
				}
			}
			var fix []string
			for _, a := range fs[0].Actions {
				fix = append(fix, a.Note+a.Config)
			}
			for _, want := range []string{"keep-alive", "ssl_session_cache", "ssl_session_tickets", "ECDSA", "worker_processes auto;"} {
				if !strings.Contains(strings.Join(fix, "\n"), want) {
					t.Errorf("fix lacks %q: %q", want, fix)
				}
			}
			// The two findings agree: the saturated worker is named too,
			// and neither is made a consequence of the other.
			all, _ := Diagnose(in.Run)
			var ws, tls bool
			for _, f := range all {
				ws = ws || f.ID == WorkerSaturated
				tls = tls || f.ID == TLSHandshakes && f.CausedBy == ""
			}
			if !ws || !tls {
				t.Errorf("diagnose: worker-saturated %v, tls-handshakes %v: %+v", ws, tls, keys(all))
			}
		})
	}
}
