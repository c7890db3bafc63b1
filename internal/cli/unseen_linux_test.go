package cli

import (
	"context"
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
