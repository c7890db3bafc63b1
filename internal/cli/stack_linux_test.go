package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labtest"
	"github.com/netdoctor/netdoctor/internal/report"
)

// newLab builds a client/server namespace pair for one test, named
// after this process and the test's turn ("c" for cli: other packages'
// labs may run at the same time).
func newLab(t *testing.T) *lab.Env {
	t.Helper()
	return labtest.New(t, fmt.Sprintf("c%d-%d", os.Getpid()%100000, labs.Add(1)))
}

var labs atomic.Int64

var labMust = labtest.Must

// runLab runs netdoctor run in the lab's client namespace against its
// server, observing the server namespace.
func runLab(t *testing.T, e *lab.Env, args string) (int, *runJSON, string) {
	t.Helper()
	return runIn(t, e.ClientNS.Name, "runremote", args+" --baseline 1s --tail 1s --server-netns "+e.ServerNS.Name+" http://"+e.ServerIP+"/")
}

// wantActive checks that each finding is active on the side, with at
// least one evidence item from the run's window, and returns them.
func wantActive(t *testing.T, r *runJSON, text string, side report.Side, ids ...report.FindingID) map[report.FindingID]*report.Finding {
	t.Helper()
	out := map[report.FindingID]*report.Finding{}
	for _, id := range ids {
		f := findActive(r, id)
		if f == nil {
			var got []string
			for _, f := range r.Findings {
				got = append(got, string(f.Status)+" "+string(f.ID))
			}
			t.Errorf("no active %s; findings: %s\n%s", id, strings.Join(got, ", "), text)
			continue
		}
		if side != "" && f.Side != side {
			t.Errorf("%s on side %q, want %q", id, f.Side, side)
		}
		out[id] = f
	}
	everyActiveHasWindowEvidence(t, r)
	return out
}

// everyActiveHasWindowEvidence: an active finding rests on something
// seen during this run.
func everyActiveHasWindowEvidence(t *testing.T, r *runJSON) {
	t.Helper()
	for _, f := range r.Findings {
		if f.Status != report.Active {
			continue
		}
		ok := false
		for _, e := range f.Evidence {
			ok = ok || e.Window
		}
		if !ok {
			t.Errorf("active %s %s has no evidence from the run window: %+v", f.ID, f.Subject, f.Evidence)
		}
	}
}

func evidenceHas(f *report.Finding, sub string) bool {
	for _, e := range f.Evidence {
		if strings.Contains(e.Text, sub) {
			return true
		}
	}
	return false
}

func fixHas(f *report.Finding, sub string) bool {
	for _, x := range f.Fix {
		if strings.Contains(x, sub) {
			return true
		}
	}
	return false
}

// TestRunHealthyStack: nginx → php-fpm with upstream keepalive and room to
// spare: no critical finding, exit 0, and the servers discovered.
func TestRunHealthyStack(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	fpm := &lab.FPM{MaxChildren: 8}
	_, err := e.StartFPM(ctx, fpm)
	labMust(t, err)
	_, err = e.StartNginx(ctx, &lab.Nginx{PHP: fpm, KeepConn: true})
	labMust(t, err)
	code, r, text := runLab(t, e, "-c 4 -t 1 -d 3s")
	for _, f := range r.Findings {
		if f.Severity == report.Critical && f.Status == report.Active {
			t.Errorf("critical %s on a healthy stack: %+v", f.ID, f.Evidence)
		}
	}
	if code != 0 || r.Load.Requests < 100 {
		t.Errorf("exit %d, %d requests\n%s", code, r.Load.Requests, text)
	}
	// Both servers found: nginx in front with its upstream reused, the
	// pool behind it with its limits and where they are set.
	if len(r.Servers) != 2 || r.Servers[0].Kind != "nginx" || r.Servers[1].Kind != "php-fpm" {
		t.Fatalf("servers %s", jsonOf(r.Servers))
	}
	ng, pool := r.Servers[0], r.Servers[1]
	if ng.Nginx == nil || len(ng.Nginx.Upstreams) != 1 || !ng.Nginx.Upstreams[0].Reuse || ng.Addr != e.ServerIP+":80" {
		t.Errorf("nginx %s", jsonOf(ng))
	}
	if pool.Pool == nil || pool.Pool.MaxChildren.Value != 8 || !strings.HasPrefix(pool.Pool.MaxChildren.Source, e.Dir+"/fpm/php-fpm.conf:") || pool.Role != "upstream" {
		t.Errorf("php-fpm %s", jsonOf(pool))
	}
	var samples, logs int
	for _, s := range r.Servers {
		samples += len(s.Samples)
		logs += len(s.Logs)
	}
	if samples < 6 || logs < 3 {
		t.Errorf("%d worker samples, %d logs: %s", samples, logs, jsonOf(r.Servers))
	}
}

// testRunPHPMaxChildren is seed 000 stage 2: a dynamic pool of 2 workers
// whose requests take 100 ms, under 40 connections. php-fpm logs
// "reached pm.max_children"; run must name the pool, its setting with
// file:line, and the log line, and size it as tune plan does: 40 in
// flight, 5 spare, one for the status page.
func testRunPHPMaxChildren(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	fpm := &lab.FPM{MaxChildren: 2, Dynamic: true, SleepMS: 100, Backlog: 4}
	_, err := e.StartFPM(ctx, fpm)
	labMust(t, err)
	_, err = e.StartNginx(ctx, &lab.Nginx{PHP: fpm, KeepConn: true})
	labMust(t, err)
	code, r, text := runLab(t, e, "-c 40 -t 1 -d 4s --timeout 2s")
	fs := wantActive(t, r, text, "server", "worker-pool-exhausted")
	f := fs["worker-pool-exhausted"]
	if code != ExitFindings || f == nil {
		t.Fatalf("exit %d\n%s", code, text)
	}
	if f.Subject != "php-fpm pool www" || !evidenceHas(f, "reached pm.max_children") || !fixHas(f, "pm.max_children = 2 → 46 in "+e.Dir+"/fpm/php-fpm.conf:") {
		t.Errorf("subject %q evidence %+v fix %q", f.Subject, f.Evidence, f.Fix)
	}
	if !evidenceHas(f, "sleep") {
		t.Errorf("the workers' wait (usleep) is not in the evidence: %+v", f.Evidence)
	}
	if r.Verdict == "" || !strings.Contains(r.Verdict, "php-fpm pool www is full") {
		t.Errorf("verdict %q; findings in order: %v", r.Verdict, activeIDs(r))
		for _, f := range r.Findings {
			t.Logf("%s %s %s %s: %s %v", f.Severity, f.Status, f.ID, f.Subject, f.Title, f.Evidence)
		}
	}
	// The pool's small listen.backlog overflows because the pool is
	// full: named with its line, and placed after its cause.
	for i, q := range r.Findings {
		if q.ID != "accept-queue-overflow" || q.Subject != "127.0.0.1:9000" || q.Status != report.Active {
			continue
		}
		if q.CausedBy != "worker-pool-exhausted" || r.Findings[i-1].ID != "worker-pool-exhausted" {
			t.Errorf("pool socket overflow caused by %q, after %s", q.CausedBy, r.Findings[i-1].ID)
		}
		if !fixHas(&q, "listen.backlog = 4096` in pool www ("+e.Dir+"/fpm/php-fpm.conf:") {
			t.Errorf("fix %q", q.Fix)
		}
		return
	}
	t.Errorf("no active accept-queue-overflow on the pool's socket (listen.backlog 4): %v", r.Findings)
}

// testRunUpstreamPortExhaustion is seed 000 stage 4: nginx → php-fpm on
// the server's address without keepalive, 51 local ports, 200 client
// connections: nginx needs more upstream connections at once than it has
// ports, logs "(99: Cannot assign requested address)" and answers 502.
// (php-fpm closes first, so TIME_WAIT stays on its side: it is the
// concurrency, not TIME_WAIT, that uses the ports up.) run must report
// the churn as the cause and the port exhaustion as its consequence.
func testRunUpstreamPortExhaustion(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	fpm := &lab.FPM{Listen: e.ServerIP + ":9000", MaxChildren: 8, SleepMS: 5}
	_, err := e.StartFPM(ctx, fpm)
	labMust(t, err)
	_, err = e.StartNginx(ctx, &lab.Nginx{PHP: fpm})
	labMust(t, err)
	labMust(t, e.Sysctl(e.ServerNS, "net.ipv4.ip_local_port_range", "20000 20050"))
	code, r, text := runLab(t, e, "-c 200 -t 1 -d 4s")
	fs := wantActive(t, r, text, "server", "upstream-connection-churn", "ephemeral-port-exhaustion")
	if code != ExitFindings {
		t.Errorf("exit %d", code)
	}
	if f := fs["ephemeral-port-exhaustion"]; f != nil && f.CausedBy != "upstream-connection-churn" {
		t.Errorf("port exhaustion caused by %q, want upstream-connection-churn", f.CausedBy)
	}
	if f := fs["upstream-connection-churn"]; f != nil {
		if !evidenceHas(f, "Cannot assign requested address") || !fixHas(f, "fastcgi_keep_conn on") || !fixHas(f, "keepalive") {
			t.Errorf("churn evidence %+v fix %q", f.Evidence, f.Fix)
		}
		if f.Explains == "" {
			t.Errorf("churn does not say what share of the failures it explains")
		}
	}
	for i, f := range r.Findings {
		if f.ID == "ephemeral-port-exhaustion" && (i == 0 || r.Findings[i-1].ID != "upstream-connection-churn") {
			t.Errorf("the cause is not reported right before its consequence: %v", r.Findings)
		}
	}
}

func jsonOf(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// testRunFDLimit is seed 004's descriptor limit: nginx workers limited to
// 64 open files under 200 connections. nginx logs "accept4() failed (24:
// Too many open files)"; run must report fd-limit with that line and the
// worker_rlimit_nofile directive to change.
func testRunFDLimit(t *testing.T) {
	e := newLab(t)
	_, err := e.StartNginx(context.Background(), &lab.Nginx{RlimitNofile: 64, WorkerConnections: 1024})
	labMust(t, err)
	_, r, text := runLab(t, e, "-c 200 -t 1 -d 3s --timeout 1s")
	f := wantActive(t, r, text, "server", "fd-limit")["fd-limit"]
	if f == nil {
		return
	}
	if !evidenceHas(f, "Too many open files") || !fixHas(f, "worker_rlimit_nofile") || !fixHas(f, e.Dir+"/nginx/nginx.conf:") {
		t.Errorf("evidence %+v fix %q", f.Evidence, f.Fix)
	}
}

// testRunRandomLoss: the server namespace drops 5% of incoming TCP
// packets (nftables, no netem here): run must report packet-loss.
func testRunRandomLoss(t *testing.T) {
	e := newLab(t)
	_, err := e.StartNginx(context.Background(), &lab.Nginx{BodyBytes: 20000})
	labMust(t, err)
	labMust(t, e.DropRandom(e.ServerNS, 5))
	_, r, text := runLab(t, e, "-c 20 -t 1 -d 3s")
	wantActive(t, r, text, "", "packet-loss")
}

// TestRunBandwidthCap: a 20 KB page behind an 8 Mbit/s token bucket on
// the server's veth: run must report bandwidth-saturated on that device.
func TestRunBandwidthCap(t *testing.T) {
	// Alone, not in the two-at-a-time pool, though its load is light (8
	// Mbit/s: 50 pages a second): beside another test's load on a slow
	// pass its tbf's seconds read drops and loss, not a full rate (CI run
	// 18).
	e := newLab(t)
	_, err := e.StartNginx(context.Background(), &lab.Nginx{BodyBytes: 20000})
	labMust(t, err)
	labMust(t, e.Shape(e.ServerNS, e.ServerDev, "8mbit"))
	_, r, text := runLab(t, e, "-c 20 -t 1 -d 5s")
	f := wantActive(t, r, text, "server", "bandwidth-saturated")["bandwidth-saturated"]
	if f != nil && f.Subject != e.ServerDev {
		t.Errorf("subject %q, want %s", f.Subject, e.ServerDev)
	}
}

// testRunSYNQueue: a server that accepts slowly with backlog 8, and
// syncookies off in its namespace. Completed handshakes the full accept
// queue cannot take stay in the SYN queue, which overflows; without
// cookies the kernel drops new SYNs (TcpExtTCPReqQFullDrop).
func testRunSYNQueue(t *testing.T) {
	e := newLab(t)
	labMust(t, e.Sysctl(e.ServerNS, "net.ipv4.tcp_syncookies", "0"))
	startServe(t, e.ServerNS.Name, "ND_SERVER=slow", "ND_ADDR="+e.ServerIP+":80")
	_, r, text := runLab(t, e, "-c 100 -t 1 -d 3s")
	f := wantActive(t, r, text, "server", "syn-queue-overflow", "accept-queue-overflow")["syn-queue-overflow"]
	if f != nil && !evidenceHas(f, "TcpExtTCPReqQFullDrop +") {
		t.Errorf("evidence %+v", f.Evidence)
	}
}

// testRunSomaxconn: the application asks for backlog 4096 but the
// server namespace's net.core.somaxconn is 8: the finding must name the
// sysctl as the limit, not the application.
func testRunSomaxconn(t *testing.T) {
	e := newLab(t)
	labMust(t, e.Sysctl(e.ServerNS, "net.core.somaxconn", "8"))
	startServe(t, e.ServerNS.Name, "ND_SERVER=slowbig", "ND_ADDR="+e.ServerIP+":80")
	_, r, text := runLab(t, e, "-c 100 -t 1 -d 3s")
	f := wantActive(t, r, text, "server", "accept-queue-overflow")["accept-queue-overflow"]
	if f != nil && !evidenceHas(f, "net.core.somaxconn 8") {
		t.Errorf("the limit is not named as somaxconn: %+v", f.Evidence)
	}
}

// TestRunAppSlow is seed 003's second fault: every request appends to
// one log file under an exclusive flock and holds it 20 ms, with workers
// to spare. Latency grows while the CPU idles; the workers' wait channels
// show them queued on the file lock.
func TestRunAppSlow(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	fpm := &lab.FPM{MaxChildren: 16, SleepMS: 20, FlockLog: true}
	_, err := e.StartFPM(ctx, fpm)
	labMust(t, err)
	_, err = e.StartNginx(ctx, &lab.Nginx{PHP: fpm, KeepConn: true})
	labMust(t, err)
	_, r, text := runLab(t, e, "-c 8 -t 1 -d 4s")
	f := wantActive(t, r, text, "server", "app-slow")["app-slow"]
	if f == nil {
		t.Logf("load %+v\nservers %s", r.Load, jsonOf(r.Servers))
	}
	if f != nil && (!evidenceHas(f, "file-lock") || !fixHas(f, "file lock")) {
		t.Errorf("the file lock is not named: evidence %+v fix %q", f.Evidence, f.Fix)
	}
	if findActive(r, "worker-pool-exhausted") != nil {
		t.Errorf("16 workers for 8 connections were reported exhausted")
	}
	// nginx waits on php-fpm: that is the lock's consequence.
	if d := findActive(r, "dependency-slow"); d != nil && (d.CausedBy != "app-slow" || f == nil || d.CauseSubject != f.Subject) {
		t.Errorf("nginx's wait on php-fpm (%s) is not the lock's consequence: caused by %q %q", d.Subject, d.CausedBy, d.CauseSubject)
	}
}
