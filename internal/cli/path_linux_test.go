package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// TestPathProbeRun: with an agent that offers the test endpoint, run
// probes the path before the load, the report carries what it measured
// (a 20 Mbit/s tbf from the server, 5 % of the probe's UDP dropped), and
// findings that compare the application with the path cite it;
// --no-path-probe turns it off.
func TestPathProbeRun(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	_, err := e.StartNginx(ctx, &lab.Nginx{})
	labMust(t, err)
	url, tok, _, err := labAgent(ctx, e, "--test-endpoint", e.ServerIP+":9121")
	labMust(t, err)
	labMust(t, e.Shape(e.ServerNS, e.ServerDev, "20mbit"))
	labMust(t, e.DropUDP(e.ServerNS, 9121, 5))
	_, r, text := runIn(t, e.ClientNS, "runremote", "-c 10 -t 1 -d 3s --baseline 1s --tail 1s --server-agent "+url+" --token-file "+tok+" http://"+e.ServerIP+"/")
	p := r.Path
	if p == nil {
		t.Fatalf("no path in the report:\n%s", text)
	}
	t.Logf("path: %.1f Mbit/s down, %d retransmits, min RTT %v, UDP %d sent, %.2f %% lost, jitter %v, error %q",
		p.DownBitsPerSecond/1e6, p.Retransmits, p.MinRTT, p.UDPSent, p.UDPLossPercent, p.UDPJitter, p.Error)
	if p.Error != "" || p.DownBitsPerSecond < 17e6 || p.DownBitsPerSecond > 21e6 {
		t.Errorf("path down %.1f Mbit/s (error %q), want the tbf's 20", p.DownBitsPerSecond/1e6, p.Error)
	}
	if p.UDPSent < 1000 || p.UDPLossPercent < 2.5 || p.UDPLossPercent > 7.5 {
		t.Errorf("path UDP: %d sent, %.2f %% lost, want about 5", p.UDPSent, p.UDPLossPercent)
	}
	for _, f := range r.Findings {
		t.Logf("finding %s %s on %s: %d evidence items, cites the probe: %v", f.Status, f.ID, f.Side, len(f.Evidence), hasItem(f.Evidence, "path probe"))
	}
	for _, id := range []string{string(rules.BandwidthSaturated), string(rules.PacketLoss)} {
		for _, f := range r.Findings {
			if string(f.ID) == id && !hasItem(f.Evidence, "path probe") {
				t.Errorf("%s does not cite the path probe: %+v", id, f.Evidence)
			}
		}
	}
	_, r, text = runIn(t, e.ClientNS, "runremote", "-c 2 -t 1 -d 1s --baseline 1s --tail 1s --no-path-probe --server-agent "+url+" --token-file "+tok+" http://"+e.ServerIP+"/")
	if r.Path != nil || strings.Contains(text, "path:") {
		t.Errorf("--no-path-probe: path %+v", r.Path)
	}
}

func hasItem(items []report.Item, source string) bool {
	for _, it := range items {
		if it.Source == source {
			return true
		}
	}
	return false
}
