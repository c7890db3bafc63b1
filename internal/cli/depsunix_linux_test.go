package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// testRunDependencyUnix: a Go API with a pool of 4 connections to a
// backend listening on a socket file (answering after 20 ms), under 50
// connections. The API's dependency table lists unix:/… with the
// backend's owner and 4 connections, not timed (no tcp_info for a unix
// socket) and with no timing finding; the backend is observed as a
// server of the run (role dependency, its threads sampled).
func testRunDependencyUnix(t *testing.T) {
	e := newLab(t)
	sock := filepath.Join(t.TempDir(), "backend.sock")
	backend := "unix:" + sock
	api := depStart(t, e, e.ServerNS.Name, backend, false, 20*time.Millisecond, 0)
	_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 50 -t 1 -d 4s --timeout 5s --server-netns "+e.ServerNS.Name+" --baseline 1s --tail 1s http://"+api+"/")
	d := dependencyOf(r, backend)
	if d == nil {
		t.Fatalf("no dependency %s: %s\n%s", backend, jsonOf(r.Servers), text)
	}
	t.Logf("%s (%s): %d conns, %d new, unread %.2f over %.1f s, %d samples", d.Addr, d.Owner, d.Conns, d.New, d.Unread, d.Seconds, d.Samples)
	if d.Conns != 4 || !strings.Contains(d.Owner, "(pid ") || !d.Observed || d.Untimed != app.UnixUntimed {
		t.Errorf("dependency %+v, want 4 connections, the owner observed, untimed", d)
	}
	if d.Busy != 0 || d.RoundTrip != 0 || d.RoundTripsPerSec != 0 {
		t.Errorf("a unix dependency timed: %+v", d)
	}
	var observed *app.Server
	for _, s := range r.Servers {
		if s.Role == "dependency" && s.Addr == sock {
			observed = s
		}
	}
	if observed == nil || len(observed.Samples) == 0 || !strings.Contains(d.Owner, observed.Kind) {
		t.Errorf("the backend is not a sampled server of the run: %s", jsonOf(r.Servers))
	}
	// The row as the text and HTML reports print it.
	var row []string
	for _, tb := range report.WaitTables(r.Servers) {
		for _, cells := range tb.Rows {
			if cells[0] == backend {
				row = cells
			}
		}
	}
	if len(row) < 7 || row[2] != "4" || row[6] != "not timed (unix socket: no tcp_info)" {
		t.Errorf("the table's row %q, want 4 connections, not timed", row)
	}
	for _, id := range []report.FindingID{rules.DependencyPoolSaturated, rules.DependencySlow} {
		if f := findActive(r, id); f != nil {
			t.Errorf("%s from an untimed dependency: %s", id, f.Title)
		}
	}
}

// testRunDependencyUnixPHP: nginx → php-fpm on a socket file, as
// Debian's default pool (/run/php/php8.2-fpm.sock) is reached, one
// FastCGI connection per request (nginx's default), and a pool of 2
// workers whose requests take 100 ms, under 20 connections. nginx's
// table lists the pool's socket with php-fpm as its owner, observed; the
// pool's own finding (worker-pool-exhausted) is in the report, and no
// timing finding comes from the unix row. The requests left waiting in
// php-fpm's accept queue (nginx connected, not yet accepted) sit unread
// at its end: the row's unread share.
func testRunDependencyUnixPHP(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	sock := filepath.Join(e.Dir, "fpm", "www.sock")
	fpm := &lab.FPM{Listen: "unix:" + sock, MaxChildren: 2, SleepMS: 100}
	_, err := e.StartFPM(ctx, fpm)
	labMust(t, err)
	_, err = e.StartNginx(ctx, &lab.Nginx{PHP: fpm})
	labMust(t, err)
	_, r, text := runLab(t, e, "-c 20 -t 1 -d 4s --timeout 5s")
	wantActive(t, r, text, "server", rules.WorkerPoolExhausted)
	var ng *app.Server
	for _, s := range r.Servers {
		if s.Kind == "nginx" {
			ng = s
		}
	}
	d := dependencyOf(r, "unix:"+sock)
	if ng == nil || d == nil {
		t.Fatalf("no dependency unix:%s: %s", sock, jsonOf(r.Servers))
	}
	t.Logf("%s (%s): %d conns, %d new, unread %.2f over %.1f s", d.Addr, d.Owner, d.Conns, d.New, d.Unread, d.Seconds)
	if !strings.HasPrefix(d.Owner, "php-fpm (pid ") || !d.Observed || d.Untimed == "" || d.Conns+d.New == 0 {
		t.Errorf("dependency %+v, want php-fpm observed, connections, untimed", d)
	}
	if d.Unread < 0.5 {
		t.Errorf("unread %.2f: 20 requests at 2 workers mostly wait unread in php-fpm's queue", d.Unread)
	}
	for _, id := range []report.FindingID{rules.DependencyPoolSaturated, rules.DependencySlow} {
		if f := findActive(r, id); f != nil {
			t.Errorf("%s from an untimed dependency: %s", id, f.Title)
		}
	}
}
