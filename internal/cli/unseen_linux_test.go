package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestRunNoKeepaliveNotBlamed: `run --no-keepalive` against a plain
// nginx opens a connection per request, as it was asked to; no finding
// blames those connections (they once raised upstream-connection-churn
// "to 10.x:80"), and the load's section says what the load did.
func TestRunNoKeepaliveNotBlamed(t *testing.T) {
	e := newLab(t)
	_, err := e.StartNginx(context.Background(), &lab.Nginx{})
	labMust(t, err)
	code, r, text := runLab(t, e, "-c 50 -t 1 -d 4s --no-keepalive")
	for _, f := range r.Findings {
		if f.ID == "upstream-connection-churn" || f.ID == "ephemeral-port-exhaustion" && f.Status == report.Active {
			t.Errorf("the load's own connections blamed: %s %s on %s: %s", f.ID, f.Status, f.Side, f.Title)
		}
		if f.Status == report.Active && f.Severity == report.Critical {
			t.Errorf("critical %s against a healthy nginx: %+v", f.ID, f.Evidence)
		}
	}
	if code != 0 || r.Load.Requests < 1000 || r.Load.KeepAlive {
		t.Errorf("exit %d, %d requests, keep-alive %v\n%s", code, r.Load.Requests, r.Load.KeepAlive, text)
	}
	notes := strings.Join(r.LoadNotes, "\n")
	if !strings.Contains(notes, "a new connection per request, as asked with --no-keepalive") || !strings.Contains(notes, "local ports of the client in use towards the target") {
		t.Errorf("the load's notes do not say what the load did: %q", r.LoadNotes)
	}
}

// testCheckLossyResolver: `check` in a namespace whose only resolver
// loses half its queries. One query per type could not tell it from a
// dead one (it once said "no configured nameserver answers"); repeated
// queries measure its loss, and it is dns-slow with that rate and what
// glibc makes of it, not dns-misconfigured.
func testCheckLossyResolver(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	_, err := e.StartDnsmasq(ctx, e.ServerNS, &lab.Dnsmasq{Listen: []string{"127.0.0.1"}, BogusPriv: true})
	labMust(t, err)
	labMust(t, e.ResolvConf(e.ServerNS, "nameserver 127.0.0.1\n"))
	labMust(t, e.DropUDP(e.ServerNS, 53, 50))
	cmd := exec.Command("ip", "netns", "exec", e.ServerNS.Name, os.Args[0], "check", "--window", "1s", "--json", "-")
	cmd.Env = append(os.Environ(), "ND_HELPER=cli") // the test binary as netdoctor
	out, err := cmd.Output()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	var r struct {
		Findings []report.Finding `json:"findings"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var slow *report.Finding
	for i, f := range r.Findings {
		if f.ID == "dns-misconfigured" {
			t.Errorf("a resolver answering half its queries called misconfigured: %+v", f.Evidence)
		}
		if f.ID == "dns-slow" {
			slow = &r.Findings[i]
		}
	}
	if slow == nil {
		t.Fatalf("no dns-slow; findings %+v", r.Findings)
	}
	if !strings.Contains(slow.Title, "loses") || !evidenceHas(slow, "of 10 A queries") || !evidenceHas(slow, "lost (") || !evidenceHas(slow, "stall 5 s") {
		t.Errorf("dns-slow without the loss measured: %q %+v", slow.Title, slow.Evidence)
	}
}
