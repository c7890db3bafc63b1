package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/poll"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestCheckTLSHandshakes: check, without a load of its own, profiles the
// servers behind the namespace's listeners during its window and says
// what their work is. Clients that open a new connection per request to
// a one-worker RSA-4096 nginx, or to the second kind of server, a Go
// crypto/tls one under GOMAXPROCS=1: the handshakes named with the
// listener's new connections a second and the CPU each. The same nginx
// under keep-alive clients: its TLS work is no claim.
func TestCheckTLSHandshakes(t *testing.T) {
	e := newLab(t)
	_, err := e.StartNginx(context.Background(), &lab.Nginx{Port: 443, TLS: true, TLSKeyBits: 4096, Body: "ok\n"})
	labMust(t, err)
	goAddr := e.ServerIP + ":7761"
	startServe(t, e.ServerNS.Name, "ND_SERVER=tls", "ND_ADDR="+goAddr, "GOMAXPROCS=1")
	for _, c := range []struct {
		name, url, kind string
		keepAlive       bool
	}{
		{"nginx", "https://" + e.ServerIP + "/", "nginx", false},
		{"go", "https://" + goAddr + "/", filepath.Base(os.Args[0]), false},
		{"nginx-keepalive", "https://" + e.ServerIP + "/", "nginx", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sent := traffic{clients: 8, keepAlive: c.keepAlive, timeout: 5 * time.Second, insecure: true}.run(ctx, t, e, c.url)
			poll.True(t, time.Minute, "the clients' first answers", func() bool { return sent.ok.Load() >= 8 })
			out := filepath.Join(t.TempDir(), "r.json")
			start, before := time.Now(), sent.ok.Load()
			code, stdout, stderr := runCLI(t, "check", "--netns", e.ServerNS.Name, "--window", "3s", "--no-dns", "--json", out)
			rate := float64(sent.ok.Load()-before) / time.Since(start).Seconds()
			if code != ExitOK && code != ExitFindings {
				t.Fatalf("check exit %d\n%s\n%s", code, stdout, stderr)
			}
			r := readReport(t, out)
			if r.Profile == nil || len(r.Profile.Servers) == 0 {
				t.Fatalf("check took no profile of the servers (%s)", r.ProfileError)
			}
			if !strings.Contains(stdout, "On-CPU profile of the servers") {
				t.Errorf("check's text shows no profile:\n%s", stdout)
			}
			f := activeIn(r.Findings, rules.TLSHandshakes)
			if c.keepAlive {
				if f != nil {
					t.Errorf("TLS handshakes named under keep-alive (%.0f requests/s): %s", rate, dump(f))
				}
				return
			}
			if f == nil {
				t.Fatalf("the TLS handshakes not named (the clients' %.0f requests/s, a connection each); profile %+v", rate, r.Profile.Servers)
			}
			t.Logf("measured: the clients' %.0f requests/s; %s; %s", rate, f.Title, strings.Join(itemTexts(f.Evidence), "; "))
			if !strings.HasPrefix(f.Subject, c.kind+" ") {
				t.Errorf("the handshakes named on %q, want the %s server", f.Subject, c.kind)
			}
			m := regexp.MustCompile(`TLS handshakes: ([0-9]+) new connections/s, ([0-9.]+) ms of CPU each`).FindStringSubmatch(f.Title)
			if m == nil {
				t.Fatalf("the TLS finding lacks its rate and cost: %s", f.Title)
			}
			got, _ := strconv.ParseFloat(m[1], 64)
			each, _ := strconv.ParseFloat(m[2], 64)
			// The listener's accepted connections are the clients'
			// (one a request), over check's window rather than the
			// span measured here around the whole command.
			if got < 0.5*rate || got > 1.5*rate+1 {
				t.Errorf("%.0f new connections/s named, the clients made %.0f", got, rate)
			}
			if each < 0.2 || each > 50 {
				t.Errorf("%.1f ms of CPU a handshake, want an RSA handshake's few ms", each)
			}
		})
	}
}
