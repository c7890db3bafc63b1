package rules

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// redisRemote is outgoing connections to seed 004's redis.
func redisRemote(tw, est int) evidence.Remote {
	return evidence.Remote{Addr: "10.0.0.5:6379", Established: est, TimeWait: tw, Ephemeral: tw + est}
}

var _ = addTable("checkChurn", checkChurn, churnCases)

// churnCases are churn as the kernel alone shows it (check, diagnose).
func churnCases() []ruleCase {
	redis := redisRemote
	return []ruleCase{
		{name: "healthy", bundle: bundle(nil, nil)},
		{
			name:   "a new connection per request to redis (seed 004)",
			bundle: bundle(remotes(redis(7000, 10)), all(remotes(redis(8000, 10)), raise(1200, "Tcp.ActiveOpens"))),
			want: []want{{ID: "upstream-connection-churn", Status: report.Active, Severity: report.Warning, Subject: "10.0.0.5:6379",
				Evidence: []string{
					"8000 TIME_WAIT and 10 ESTABLISHED connections to 10.0.0.5:6379",
					"TcpActiveOpens +1200 in 1s (1200.0/s)",
				}}},
		},
		{
			name:   "churn filling half the range is critical",
			bundle: bundle(nil, all(remotes(redis(15000, 10)), raise(1000, "Tcp.ActiveOpens"))),
			want: []want{{ID: "upstream-connection-churn", Status: report.Active, Severity: report.Critical, Subject: "10.0.0.5:6379",
				Evidence: []string{"15000 TIME_WAIT"}}},
		},
		{
			name:   "ports exhausted by churn (seed 000 stage 5)",
			bundle: bundle(nil, all(remotes(redis(26000, 0)), raise(1000, "Tcp.ActiveOpens"))),
			want: []want{
				{ID: "upstream-connection-churn", Status: report.Active, Severity: report.Critical, Subject: "10.0.0.5:6379",
					Evidence: []string{"26000 TIME_WAIT", "TcpActiveOpens +1000"}},
			},
		},
		{
			name:   "churn threshold: a quarter of the range in TIME_WAIT at 50/s",
			bundle: bundle(nil, all(remotes(redis(7058, 0)), raise(50, "Tcp.ActiveOpens"))),
			want: []want{{ID: "upstream-connection-churn", Status: report.Active, Severity: report.Warning, Subject: "10.0.0.5:6379",
				Evidence: []string{"TcpActiveOpens +50 in 1s (50.0/s)"}}},
		},
		{
			name:   "TIME_WAIT below a quarter of the range",
			bundle: bundle(nil, all(remotes(redis(7057, 0)), raise(5000, "Tcp.ActiveOpens"))),
		},
		{
			name:   "few new connections",
			bundle: bundle(nil, all(remotes(redis(20000, 0)), raise(49, "Tcp.ActiveOpens"))),
		},
		{
			name:   "ActiveOpens went backwards",
			bundle: bundle(all(remotes(redis(20000, 0)), raise(1e6, "Tcp.ActiveOpens")), remotes(redis(20000, 0))),
		},
		{
			name:   "one snapshot: no rate, no churn",
			bundle: single(remotes(redis(20000, 0))),
		},
	}
}

func TestCheckChurn(t *testing.T) {
	runCases(t, "checkChurn", checkChurn, churnCases())
}

// nginxProxy is an nginx passing to backend without connection reuse.
func nginxProxy(reuse bool) *app.Server {
	u := app.NginxUpstream{Pass: "proxy_pass", PassSource: "/etc/nginx/nginx.conf:30", Target: "backend",
		Servers: []string{"10.0.0.5:8080"}, Block: "/etc/nginx/nginx.conf:20", Reuse: reuse}
	if !reuse {
		u.Why = "upstream backend has no keepalive; proxy_http_version 1.0 (default)"
	}
	return &app.Server{Role: "front", Kind: "nginx", Addr: "0.0.0.0:80", PIDs: []int{100},
		Nginx: &app.NginxInfo{WorkerProcesses: app.Setting{Value: 2}, Upstreams: []app.NginxUpstream{u}}}
}

// serverRun is the input of a rule on a run's server side: 5000
// requests over 50 connections, b the server's window.
func serverRun(b *evidence.Bundle, servers ...*app.Server) *Input {
	r := &evidence.Run{Load: &load.Result{Connections: 50, Requests: 5000, Status: map[string]uint64{"2xx": 5000}},
		LoadStart: b.Snapshots[0].Time, LoadEnd: b.Snapshots[len(b.Snapshots)-1].Time, Port: "80", Servers: servers,
		Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Server, Observed: true}, Bundle: b}}}
	return &Input{Bundle: b, Side: report.Server, Run: r}
}

// TestChurnInRun: in a run the churn is found from what no kernel-only
// threshold sees: an nginx upstream without reuse while a new connection
// opens per request, or, for a server netdoctor has no configuration of
// (a home-made proxy, nginx + Lua), one new connection per request
// towards the remote holding the TIME_WAIT. With reuse, nothing.
func TestChurnInRun(t *testing.T) {
	perRequest := raise(5000, "Tcp.ActiveOpens")
	towards := func(tw int) func(*evidence.Snapshot) {
		return remotes(evidence.Remote{Addr: "10.0.0.5:8080", TimeWait: tw, Ephemeral: tw})
	}
	for _, tc := range []struct {
		name     string
		in       *Input
		subject  string
		evidence []string
	}{
		{"nginx without keepalive", serverRun(bundle(nil, perRequest), nginxProxy(false)), "10.0.0.5:8080",
			[]string{"TcpActiveOpens +5000 for 5000 requests answered upstream: 1.00 new connections per request",
				"proxy_pass backend at /etc/nginx/nginx.conf:30: upstream backend has no keepalive"}},
		{"a proxy of its own", serverRun(bundle(nil, all(perRequest, towards(4000))), &app.Server{Kind: "myproxy", Addr: "0.0.0.0:80"}), "10.0.0.5:8080",
			[]string{"TcpActiveOpens +5000 for 5000 requests: 1.00 new connections per request", "4000 TIME_WAIT and 0 ESTABLISHED connections to 10.0.0.5:8080"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := checkChurn(tc.in)
			if len(fs) != 1 || fs[0].ID != UpstreamConnectionChurn || fs[0].Subject != tc.subject || fs[0].Status != report.Active {
				t.Fatalf("checkChurn = %+v, want one active churn towards %s", keys(fs), tc.subject)
			}
			for _, e := range tc.evidence {
				if !hasEvidence(fs[0], e) {
					t.Errorf("no evidence %q in\n%s", e, strings.Join(evidenceTexts(fs[0]), "\n"))
				}
			}
		})
	}
	if fs := checkChurn(serverRun(bundle(nil, perRequest), nginxProxy(true))); len(fs) != 0 {
		t.Errorf("nginx reusing connections: %+v", keys(fs))
	}
	if fs := checkChurn(serverRun(bundle(nil, all(raise(50, "Tcp.ActiveOpens"), towards(4000))), &app.Server{Kind: "myproxy"})); len(fs) != 0 {
		t.Errorf("50 connects for 5000 requests is reuse, not churn: %+v", keys(fs))
	}
	// On the client side the load's own connections are not the server's
	// churn.
	in := serverRun(bundle(nil, all(perRequest, towards(4000))), nginxProxy(false))
	in.Side = report.Client
	if fs := checkChurn(in); len(fs) != 0 {
		t.Errorf("client side: %+v", keys(fs))
	}
}

// TestChurnOtherProcess: on a host where another process churns
// connections, a server whose own outbound connections were traced and
// went nowhere near that remote is not blamed: the namespace's
// TcpActiveOpens are every process's. One whose traced connections went
// there is.
func TestChurnOtherProcess(t *testing.T) {
	b := bundle(nil, all(raise(5000, "Tcp.ActiveOpens"), remotes(evidence.Remote{Addr: "127.0.0.1:9000", TimeWait: 4000, Ephemeral: 4000})))
	py := &app.Server{Role: "front", Kind: "python3", Addr: "127.0.0.1:8000", Traced: true}
	fs := checkChurn(serverRun(b, py))
	if len(fs) != 1 || !strings.HasPrefix(fs[0].Title, "A process of this namespace (not python3, whose own connections were traced and none went there) keeps opening new connections to 127.0.0.1:9000") ||
		!hasEvidence(fs[0], "python3's outbound connections were traced during the load: none to 127.0.0.1:9000") {
		t.Errorf("another process's churn: %+v", fs)
	}
	py = &app.Server{Role: "front", Kind: "python3", Addr: "127.0.0.1:8000", Traced: true, Deps: []app.Dependency{{Addr: "127.0.0.1:9000", New: 40}}}
	if fs := checkChurn(serverRun(b, py)); len(fs) != 1 || !strings.HasPrefix(fs[0].Title, "python3 opens a new connection per request to 127.0.0.1:9000") {
		t.Errorf("its own churn: %+v", fs)
	}
}

// TestChurnMerged: the kernel's TIME_WAIT pile and nginx's configuration
// towards the same upstream make one finding, led by the configuration's
// title and fix, with both kinds of evidence.
func TestChurnMerged(t *testing.T) {
	b := bundle(nil, all(raise(5000, "Tcp.ActiveOpens"), remotes(evidence.Remote{Addr: "10.0.0.5:8080", TimeWait: 20000, Ephemeral: 20000})))
	fs := checkChurn(serverRun(b, nginxProxy(false)))
	if len(fs) != 1 {
		t.Fatalf("checkChurn = %+v, want one finding", keys(fs))
	}
	f := fs[0]
	if !strings.HasPrefix(f.Title, "nginx opens a new connection per request") || f.Severity != report.Critical {
		t.Errorf("title %q severity %s: want nginx's title and the kernel's critical", f.Title, f.Severity)
	}
	for _, e := range []string{"proxy_pass backend", "20000 TIME_WAIT"} {
		if !hasEvidence(f, e) {
			t.Errorf("no evidence %q in\n%s", e, strings.Join(evidenceTexts(f), "\n"))
		}
	}
	if !hasFix(f, "add `keepalive 32;` to upstream backend") {
		t.Errorf("fix %q", fixOf(f))
	}
}

// TestChurnKernelOnly: churn found from the kernel alone, for servers no
// configuration describes: a proxy closing each backend connection with
// a reset (no TIME_WAIT: no port runs out, and a small range is then no
// risk), and a home-made proxy whose 100 ports ran out (its connects
// failed and opened nothing, so the TIME_WAIT holding the range is the
// proof, and the ports are sized from the requests it tried to connect
// for, not the few that got one).
func TestChurnKernelOnly(t *testing.T) {
	proxy := &app.Server{Kind: "haproxy", Addr: "0.0.0.0:80", PIDs: []int{400}}
	reset := serverRun(bundle(nil, all(raise(5000, "Tcp.ActiveOpens", "Tcp.OutRsts"), setSysctl("net.ipv4.ip_local_port_range", "20000 20999"),
		remotes(evidence.Remote{Addr: "10.0.0.5:8080", Established: 40, Ephemeral: 40}))), proxy)
	fs := checkChurn(reset)
	if len(fs) != 1 || fs[0].Subject != "10.0.0.5:8080" || !strings.Contains(fs[0].Title, "closing each with a reset") || !hasEvidence(fs[0], "TcpOutRsts +5000 for 5000 opened, and 0 in TIME_WAIT towards 10.0.0.5:8080") {
		t.Errorf("reset churn: %+v", fs)
	}
	if ps := checkPorts(reset); len(ps) != 0 {
		t.Errorf("connections closed with resets free their ports, yet: %+v", keys(ps))
	}

	small := func(s *evidence.Snapshot) { s.Sysctls["net.ipv4.ip_local_port_range"] = "20000 20099" }
	out := serverRun(bundle(nil, all(raise(200, "Tcp.ActiveOpens"), small,
		remotes(evidence.Remote{Addr: "10.0.0.5:8080", Established: 2, TimeWait: 98, Ephemeral: 100}))), &app.Server{Kind: "myproxy", Addr: "0.0.0.0:80", PIDs: []int{500}})
	out.Run.Load.RPS = 5000
	fs = checkChurn(out)
	if len(fs) != 1 || fs[0].Subject != "10.0.0.5:8080" || !hasEvidence(fs[0], "5000 connects a second were attempted (one per request), 200 got a port") {
		t.Errorf("exhausted churn: %+v", fs)
	}
	ps := checkPorts(out)
	if len(ps) != 1 || ps[0].Status != report.Active || !hasFix(ps[0], "5000 new connections/s × 60 s") || !hasFix(ps[0], "keeping connections open is the fix") {
		t.Errorf("ports: %+v", ps)
	}
}

// TestLoadOwnConnections: the load's own connections to the target,
// opened one per request as --no-keepalive asks, are not the client's
// churn nor its port exhaustion; the same pile towards another remote
// is.
func TestLoadOwnConnections(t *testing.T) {
	pile := func(addr string) *Input {
		b := bundle(nil, all(raise(20000, "Tcp.ActiveOpens"), remotes(evidence.Remote{Addr: addr, TimeWait: 28000, Ephemeral: 28000})))
		in := serverRun(b)
		in.Side = report.Client
		in.Run.Load.URL = "http://10.0.0.2/"
		in.Run.Load.KeepAlive = false
		return in
	}
	if fs := append(checkChurn(pile("10.0.0.2:80")), checkPorts(pile("10.0.0.2:80"))...); len(fs) != 0 {
		t.Errorf("the load's own connections blamed: %+v", keys(fs))
	}
	if fs := append(checkChurn(pile("10.0.0.9:5432")), checkPorts(pile("10.0.0.9:5432"))...); len(fs) != 2 {
		t.Errorf("another remote's pile on the client: %+v, want churn and ports", keys(fs))
	}
}

// portSearchProfile is a pprof profile of nginx's workers, a third of
// whose samples are in the kernel's search for a free local port.
func portSearchProfile(t *testing.T) *cpuprof.Profile {
	t.Helper()
	kmap := &profile.Mapping{ID: 1, File: cpuprof.KernelModule, HasFunctions: true}
	fn := func(id uint64, name string) *profile.Function { return &profile.Function{ID: id, Name: name} }
	loc := func(id uint64, f *profile.Function) *profile.Location {
		return &profile.Location{ID: id, Mapping: kmap, Address: 0xffffffff81000000 + id, Line: []profile.Line{{Function: f}}}
	}
	spin, hash, conn, write := fn(1, "native_queued_spin_lock_slowpath"), fn(2, "__inet_hash_connect"), fn(3, "tcp_v4_connect"), fn(4, "tcp_sendmsg")
	l1, l2, l3, l4 := loc(1, spin), loc(2, hash), loc(3, conn), loc(4, write)
	labels := map[string][]string{cpuprof.LabelServer: {"nginx 0.0.0.0:80"}}
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}},
		Mapping:    []*profile.Mapping{kmap}, Function: []*profile.Function{spin, hash, conn, write}, Location: []*profile.Location{l1, l2, l3, l4},
		Sample: []*profile.Sample{
			{Location: []*profile.Location{l1, l2, l3}, Value: []int64{30, 30e7}, Label: labels},
			{Location: []*profile.Location{l4}, Value: []int64{70, 70e7}, Label: labels},
		},
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return &cpuprof.Profile{Hz: 99, Samples: 100, Kept: 100, PProf: b.Bytes()}
}

// TestChurnPortSearch: the profile's port search is evidence of the
// churn that causes it (seed 000 stage 5).
func TestChurnPortSearch(t *testing.T) {
	in := serverRun(bundle(nil, raise(5000, "Tcp.ActiveOpens")), nginxProxy(false))
	in.Run.Profile = portSearchProfile(t)
	fs := checkChurn(in)
	if len(fs) == 0 || !hasEvidence(fs[0], "the on-CPU profile: 30% of nginx 0.0.0.0:80's samples set up outgoing connections (tcp_v4_connect), 30.0% in the search for a free local port (__inet_hash_connect)") {
		t.Fatalf("churn %+v", fs)
	}
	// No churn, no word of the profile.
	in = serverRun(bundle(nil, nil), nginxProxy(true))
	in.Run.Profile = portSearchProfile(t)
	if fs := checkChurn(in); len(fs) != 0 {
		t.Errorf("with reuse: %+v", fs)
	}
}
