package rules

import (
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

func ids(fs []report.Finding) string {
	var s []string
	for _, f := range fs {
		id := string(f.ID)
		if f.CausedBy != "" {
			id += "<" + string(f.CausedBy)
		}
		s = append(s, id)
	}
	return strings.Join(s, " ")
}

func TestRelateCauseFirst(t *testing.T) {
	fs := []report.Finding{
		{ID: "ephemeral-port-exhaustion", Severity: report.Critical, Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Remotes: []string{"127.0.0.1:9000"}}, Side: "server"},
		{ID: "conntrack-table-full", Severity: report.Critical, Status: report.Active, Side: "server"},
		{ID: "upstream-connection-churn", Severity: report.Warning, Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Remotes: []string{"127.0.0.1:9000"}}, Side: "server"},
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Listen: "127.0.0.1:9000"}, Side: "server"},
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "0.0.0.0:80", About: report.About{Listen: "0.0.0.0:80"}, Side: "server"},
		{ID: "worker-pool-exhausted", Severity: report.Critical, Status: report.Active, Subject: "pool www", About: report.About{Listen: "127.0.0.1:9000", Pool: "www"}, Side: "server"},
		{ID: "timewait-bucket-overflow", Severity: report.Warning, Status: report.Latent, Side: "server"},
	}
	got := ids(relate(fs))
	// The churn (a warning) is promoted to critical by the port
	// exhaustion it causes, and leads it.
	want := "accept-queue-overflow conntrack-table-full upstream-connection-churn ephemeral-port-exhaustion<upstream-connection-churn " +
		"worker-pool-exhausted accept-queue-overflow<worker-pool-exhausted timewait-bucket-overflow"
	if got != want {
		t.Errorf("order:\n got %s\nwant %s", got, want)
	}
}

func TestRelatePoolElsewhere(t *testing.T) {
	fs := []report.Finding{
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "0.0.0.0:80", About: report.About{Listen: "0.0.0.0:80"}},
		{ID: "worker-pool-exhausted", Severity: report.Critical, Status: report.Active, Subject: "pool www", About: report.About{Listen: "/run/php/www.sock", Pool: "www"}},
	}
	for _, f := range relate(fs) {
		if f.CausedBy != "" {
			t.Errorf("%s on %s blamed on %s: the pool listens elsewhere", f.ID, f.Subject, f.CausedBy)
		}
	}
}

// TestRelateDependency: a dependency's own finding is the cause of the
// time its clients wait on it, whatever the finding says of it (its pool
// full, its listener on a wildcard address overflowing, its own time),
// and a chain of three servers keeps every link; two servers waiting on
// each other are both kept, one as the other's cause.
func TestRelateDependency(t *testing.T) {
	// A subject as the rules write it, "kind addr → dependency", a
	// listener's address or a pool's name, with its About.
	active := func(id report.FindingID, sev report.Severity, subject string) report.Finding {
		f := report.Finding{ID: id, Severity: sev, Status: report.Active, Subject: subject, Side: "server"}
		switch from, dep, waits := strings.Cut(subject, " → "); {
		case waits:
			kind, addr, _ := strings.Cut(from, " ")
			f.About = report.About{Server: kind, Listen: addr, Remotes: []string{dep}}
		case strings.Contains(subject, " "):
			kind, addr, _ := strings.Cut(subject, " ")
			f.About = report.About{Server: kind, Listen: addr}
		default:
			f.About = report.About{Listen: subject}
		}
		return f
	}
	for _, tc := range []struct {
		name string
		fs   []report.Finding
		want string
	}{
		{"php-fpm's pool", []report.Finding{
			active(DependencyPoolSaturated, report.Critical, "nginx 0.0.0.0:80 → 127.0.0.1:9000"),
			active(WorkerPoolExhausted, report.Critical, "php-fpm 127.0.0.1:9000"),
		},
			"worker-pool-exhausted dependency-pool-saturated<worker-pool-exhausted"},
		{"a wildcard listener's queue", []report.Finding{
			active(DependencySlow, report.Warning, "go 10.0.0.1:8080 → 10.0.0.2:7300"),
			active(AcceptQueueOverflow, report.Critical, "0.0.0.0:7300"),
		}, "accept-queue-overflow dependency-slow<accept-queue-overflow"},
		{"another port is not the dependency", []report.Finding{
			active(DependencySlow, report.Warning, "go 10.0.0.1:8080 → 10.0.0.2:7300"),
			active(AcceptQueueOverflow, report.Critical, "0.0.0.0:7301"),
		}, "accept-queue-overflow dependency-slow"},
		{"a chain of three", []report.Finding{
			active(DependencyPoolSaturated, report.Critical, "go 10.0.0.1:8080 → 10.0.0.2:7300"),
			active(DependencySlow, report.Warning, "python3 10.0.0.2:7300 → 10.0.0.3:5432"),
			active(AppSlow, report.Warning, "postgres 10.0.0.3:5432"),
		}, "app-slow dependency-slow<app-slow dependency-pool-saturated<dependency-slow"},
		{"waiting on each other", []report.Finding{
			active(DependencyPoolSaturated, report.Critical, "go 10.0.0.1:8080 → 10.0.0.2:7300"),
			active(DependencyPoolSaturated, report.Critical, "go 10.0.0.2:7300 → 10.0.0.1:8080"),
		}, "dependency-pool-saturated dependency-pool-saturated<dependency-pool-saturated"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := relate(tc.fs)
			if got := ids(out); got != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
			for i, f := range out {
				c := report.CauseIndex(out, i)
				if (f.CausedBy != "") != (c >= 0) || c >= 0 && (out[c].ID != f.CausedBy || out[c].Subject != f.CauseSubject) {
					t.Errorf("%s %s: caused by %s %q, found at %d", f.ID, f.Subject, f.CausedBy, f.CauseSubject, c)
				}
			}
			// A cause is as severe as what it does: app-slow, a
			// warning, leads a critical chain.
			if out[0].Severity != report.Critical && tc.want != "accept-queue-overflow dependency-slow" {
				t.Errorf("the root %s is %s", out[0].ID, out[0].Severity)
			}
		})
	}
}

func TestExplain(t *testing.T) {
	lr := &load.Result{Errors: load.Errors{Connect: 30, Timeout: 10}, Status: map[string]uint64{"2xx": 1000, "5xx": 60}}
	fs := []report.Finding{
		{ID: "conntrack-table-full", Status: report.Active, Side: "server"},
		{ID: "accept-queue-overflow", Status: report.Active, Subject: "0.0.0.0:80", About: report.About{Listen: "0.0.0.0:80"}, Side: "server"},
		{ID: "worker-pool-exhausted", Status: report.Active, Subject: "pool www", Side: "server"},
		{ID: "accept-queue-overflow", Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Listen: "127.0.0.1:9000"}, Side: "server", CausedBy: "worker-pool-exhausted"},
		{ID: "risky-sysctl", Status: report.Latent},
	}
	explain(fs, lr, "80")
	for i, want := range []string{
		"with accept-queue-overflow, accounts for the 40 connection errors and timeouts: 40% of the 100 failed requests",
		"with conntrack-table-full, accounts for the 40 connection errors and timeouts: 40% of the 100 failed requests",
		"accounts for the 60 5xx responses: 60% of the 100 failed requests",
		"", "",
	} {
		if fs[i].Explains != want {
			t.Errorf("%s %s explains %q, want %q", fs[i].ID, fs[i].Subject, fs[i].Explains, want)
		}
	}
	// SYN cookies keep connections: a warning syn-queue-overflow takes
	// no share of the failures from the pool that causes them (seed
	// 000 stage 2: php-fpm's listener answers with cookies).
	fs = []report.Finding{
		{ID: "syn-queue-overflow", Severity: report.Warning, Status: report.Active, Side: "server"},
		{ID: "worker-pool-exhausted", Severity: report.Critical, Status: report.Active, Subject: "pool www", Side: "server"},
		{ID: "syn-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Listen: "127.0.0.1:9000"}, Side: "server"},
	}
	explain(fs, lr, "80")
	if fs[0].Explains != "" || fs[2].Explains != "" || fs[1].Failed != 60 {
		t.Errorf("syn-queue-overflow explains %q and %q; the pool %d failures", fs[0].Explains, fs[2].Explains, fs[1].Failed)
	}
	// An accept queue overflowing at the front behind a full pool (a
	// single-threaded Python server): the consequence accounts for the
	// connections it dropped, and its cause ranks before a busier
	// neighbour's overflow that failed none of the load's requests.
	conn := &load.Result{Errors: load.Errors{Timeout: 91}, Status: map[string]uint64{"2xx": 297}}
	chain := []report.Finding{
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Listen: "127.0.0.1:9000"}, Side: "server"},
		{ID: "worker-pool-exhausted", Severity: report.Critical, Status: report.Active, Subject: "python3 127.0.0.1:8000", Side: "server"},
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "127.0.0.1:8000", About: report.About{Listen: "127.0.0.1:8000"}, Side: "server",
			CausedBy: "worker-pool-exhausted", CauseSubject: "python3 127.0.0.1:8000"},
	}
	explain(chain, conn, "8000")
	if want := "accounts for the 91 connection errors and timeouts: 100% of the 91 failed requests"; chain[2].Explains != want || chain[0].Explains != "" {
		t.Errorf("the consequence explains %q, want %q; the neighbour's %q", chain[2].Explains, want, chain[0].Explains)
	}
	if ranked := rank(chain, conn); ranked[0].ID != "worker-pool-exhausted" || ranked[1].Subject != "127.0.0.1:8000" {
		t.Errorf("ranked %s %s, %s %s: want the pool and its overflow first", ranked[0].ID, ranked[0].Subject, ranked[1].ID, ranked[1].Subject)
	}
	// A run none of whose requests failed still had its connections
	// dropped: the impact says where they went rather than nothing,
	// next to a verdict that names the drops.
	unfelt := []report.Finding{
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "0.0.0.0:80", About: report.About{Listen: "0.0.0.0:80"}},
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Subject: "127.0.0.1:9000", About: report.About{Listen: "127.0.0.1:9000"}},
		{ID: "cpu-saturated", Severity: report.Warning, Status: report.Active},
	}
	explain(unfelt, &load.Result{Status: map[string]uint64{"2xx": 5}, Latency: load.Latency{P99: 1200 * time.Millisecond, Max: 3100 * time.Millisecond}}, "80")
	for i, want := range []string{
		"none of the load's requests failed: the clients' TCP sent the dropped connections again (a SYN after 1 s, then 3 s…), so they cost time instead: the load's p99 1.20s, max 3.10s",
		"none of the load's requests failed: 127.0.0.1:9000 is not the port the load targets (80)",
		"",
	} {
		if !strings.HasPrefix(unfelt[i].Explains, want) || want == "" && unfelt[i].Explains != "" {
			t.Errorf("%s %s explains %q, want %q", unfelt[i].ID, unfelt[i].Subject, unfelt[i].Explains, want)
		}
	}
}
