package tune

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// poolFull is the finding of a full php-fpm pool www, as run makes it.
var poolFull = report.Finding{ID: rules.WorkerPoolExhausted, Severity: report.Critical, Status: report.Active, Subject: "php-fpm pool www", About: report.About{Server: "php-fpm", Listen: "127.0.0.1:9000", Pool: "www"}, Side: "server"}

// nginxFull is the finding of nginx out of worker_connections.
var nginxFull = report.Finding{ID: rules.WorkerPoolExhausted, Severity: report.Critical, Status: report.Active, Subject: "nginx worker_connections", About: report.About{Server: "nginx", Setting: "worker_connections"}, Side: "server"}

// TestWorkerPool: php-fpm pool www (5 workers, dynamic) for 200
// requests in flight: 200 plus an eighth spare and the status page's,
// 226, and static, since dynamic forks only 32 a second.
func TestWorkerPool(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{poolFull}
	p := build(t, in, seed000Host())
	fpm := fileChange(t, p, labDir+"/fpm/php-fpm.conf")
	for _, want := range []string{"-pm.max_children = 5\n+pm.max_children = 226\n", "-pm = dynamic\n+pm = static\n"} {
		if !strings.Contains(fpm.Diff, want) {
			t.Errorf("php-fpm diff lacks %q:\n%s", want, fpm.Diff)
		}
	}
	if c := change(p, "file:"+labDir+"/fpm/php-fpm.conf"); strings.Contains(strings.Join(c.Why, "\n"), "fastcgi_keep_conn") {
		t.Errorf("no connection kept, yet the reason says so: %q", c.Why)
	}
}

// TestWorkerPoolAfterReuse: listed before the churn, the pool is still
// sized after it, so its reason covers the connections nginx will keep.
func TestWorkerPoolAfterReuse(t *testing.T) {
	in := pick(t, readSeed000(t), rules.UpstreamConnectionChurn)
	in.Findings = append([]report.Finding{poolFull}, in.Findings...)
	p := build(t, in, seed000Host())
	c := change(p, "file:"+labDir+"/fpm/php-fpm.conf")
	if c == nil {
		t.Fatalf("no php-fpm change: %s", titles(p))
	}
	if why := strings.Join(c.Why, "\n"); !strings.Contains(why, "pm.max_children 5 → 226: ") || !strings.Contains(why, "with fastcgi_keep_conn a worker stays with its nginx connection") {
		t.Errorf("the pool is sized before the connections nginx keeps:\n%s", why)
	}
}

// TestWorkerPoolMemory: 226 workers of ~5 MiB do not fit in 80% of
// 1 GiB: the pool is capped at 140, and a note says so.
func TestWorkerPoolMemory(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{poolFull}
	h := seed000Host()
	h.mem = 1 << 30
	p := build(t, in, h)
	if fpm := fileChange(t, p, labDir+"/fpm/php-fpm.conf"); !strings.Contains(fpm.Diff, "+pm.max_children = 140\n") {
		t.Errorf("pool not capped at 140:\n%s", fpm.Diff)
	}
	if want := "worker-pool-exhausted php-fpm pool www: 226 workers at ~5 MiB each do not fit in 1024 MiB available: capped at 140; add memory or make requests shorter"; notes(p) != want {
		t.Errorf("notes %q, want %q", p.Notes, want)
	}
}

// TestWorkerConnections: nginx's 2 workers with 64 connections each,
// for 200 clients with an upstream connection each: 200 per worker,
// twice that as a power of two, 512, and worker_rlimit_nofile 1024
// after worker_processes since the file does not set it.
func TestWorkerConnections(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{nginxFull}
	in.Servers[0].Nginx.WorkerConnections.Value = 64
	p := build(t, in, seed000Host())
	ng := fileChange(t, p, labDir+"/nginx/nginx.conf")
	for _, want := range []string{" worker_processes 2;\n+worker_rlimit_nofile 1024;\n", "-    worker_connections 4096;\n+    worker_connections 512;\n"} {
		if !strings.Contains(ng.Diff, want) {
			t.Errorf("nginx diff lacks %q:\n%s", want, ng.Diff)
		}
	}
}

// TestWorkerConnectionsEnough: 4096 connections a worker hold 200
// clients: nothing to change.
func TestWorkerConnectionsEnough(t *testing.T) {
	in := readSeed000(t)
	in.Findings = []report.Finding{nginxFull}
	onlyNote(t, build(t, in, seed000Host()), "worker_connections is already 4096, at least the 512 needed")
}
