package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// testPathProbeRun: with an agent that offers the test endpoint, run
// probes the path before the load, the report carries what it measured
// (an 8 Mbit/s tbf from the server, 5 % of the probe's UDP dropped each
// way), and
// the findings that compare the application with the path cite it: a
// 20 KB page saturates the tbf (bandwidth-saturated), 5 % of the TCP
// the client receives is dropped (packet-loss, the server's
// retransmissions). --no-path-probe turns
// the probe off.
func testPathProbeRun(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	_, err := e.StartNginx(ctx, &lab.Nginx{BodyBytes: 20000})
	labMust(t, err)
	url, tok, _, err := e.StartAgent(ctx, "--test-endpoint", e.ServerIP+":9121")
	labMust(t, err)
	labMust(t, e.Shape(e.ServerNS, e.ServerDev, "8mbit"))
	labMust(t, e.DropUDP(e.ServerNS, 9121, 5))
	labMust(t, e.DropRandom(e.ClientNS, 5))
	labMust(t, e.DropUDPFrom(e.ClientNS, 9121, 5))
	_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 20 -t 1 -d 5s --baseline 1s --tail 1s --server-agent "+url+" --token-file "+tok+" http://"+e.ServerIP+"/")
	p := r.Path
	if p == nil {
		t.Fatalf("no path in the report:\n%s", text)
	}
	t.Logf("path: %.1f Mbit/s down, %d retransmits, min RTT %v, UDP %d sent, %.2f %% lost, jitter %v, error %q",
		p.DownBitsPerSecond/1e6, p.Retransmits, p.MinRTT, p.UDPSent, p.UDPLossPercent, p.UDPJitter, p.Error)
	// One stream losing 5 % carries less than the tbf's 8 Mbit/s (5.8 to
	// 7.7 measured), never more.
	if p.Error != "" || p.DownBitsPerSecond < 4e6 || p.DownBitsPerSecond > 8.4e6 {
		t.Errorf("path down %.1f Mbit/s (error %q), want at most the tbf's 8", p.DownBitsPerSecond/1e6, p.Error)
	}
	if p.UDPSent < 1000 || p.UDPLossPercent < 2.5 || p.UDPLossPercent > 7.5 {
		t.Errorf("path UDP: %d sent, %.2f %% lost, want about 5", p.UDPSent, p.UDPLossPercent)
	}
	// The client's input drops 5 % of the endpoint's datagrams too: the
	// responses' direction is measured apart.
	t.Logf("path UDP down: %d sent, %.2f %% lost, jitter %v", p.UDPDownSent, p.UDPDownLossPercent, p.UDPDownJitter)
	if p.UDPDownSent < 900 || p.UDPDownLossPercent < 2 || p.UDPDownLossPercent > 8 {
		t.Errorf("path UDP down: %d sent, %.2f %% lost, want about 5", p.UDPDownSent, p.UDPDownLossPercent)
	}
	for _, f := range r.Findings {
		for _, it := range f.Evidence {
			if it.Source == "path probe" {
				t.Logf("%s %s on %s: %s", f.Status, f.ID, f.Side, it.Text)
			}
		}
	}
	cited := map[report.FindingID]bool{}
	for _, f := range r.Findings {
		if f.ID == rules.BandwidthSaturated {
			t.Logf("%s", f.Title)
			for _, it := range f.Evidence {
				t.Logf("  %s: %s", it.Source, it.Text)
			}
		}
		if f.Status == report.Active && (f.ID == rules.BandwidthSaturated || f.ID == rules.PacketLoss) {
			cited[f.ID] = hasItem(f.Evidence, "path probe")
		}
	}
	for _, id := range []report.FindingID{rules.BandwidthSaturated, rules.PacketLoss} {
		if c, ok := cited[id]; !ok || !c {
			t.Errorf("%s: active %v, cites the path probe %v", id, ok, c)
		}
	}
	_, r, text = runIn(t, e.ClientNS.Name, "runremote", "-c 2 -t 1 -d 1s --baseline 1s --tail 1s --no-path-probe --server-agent "+url+" --token-file "+tok+" http://"+e.ServerIP+"/")
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

// testPathProbeStreams: the probe's TCP runs on several streams and
// their sum is the path's capacity: under a 20 Mbit/s tbf from the
// server, within 10 % of it, each stream reported.
//
// A busy machine only lowers what the tbf delivers (its 50 ms queue
// drains while the sender waits for a CPU, and the idle link's time is
// lost: 15.7 and 16.6 Mbit/s with both CPUs taken 15 to 45 ms in every
// 100), never raises it past the rate and its 4 KB burst: the probe runs
// up to three times and the best must be within 10 %; every run must
// report its streams.
func testPathProbeStreams(t *testing.T) {
	e := newLab(t)
	ctx := context.Background()
	_, err := e.StartNginx(ctx, &lab.Nginx{BodyBytes: 100})
	labMust(t, err)
	url, tok, _, err := e.StartAgent(ctx, "--test-endpoint", e.ServerIP+":9121")
	labMust(t, err)
	labMust(t, e.Shape(e.ServerNS, e.ServerDev, "20mbit"))
	var best float64
	for attempt := 1; attempt <= 3; attempt++ {
		_, r, text := runIn(t, e.ClientNS.Name, "runremote", "-c 2 -t 1 -d 1s --baseline 1s --tail 1s --server-agent "+url+" --token-file "+tok+" http://"+e.ServerIP+"/")
		p := r.Path
		if p == nil || p.Error != "" {
			t.Fatalf("path %+v:\n%s", p, text)
		}
		var sum float64
		for i, s := range p.TCPStreams {
			t.Logf("stream %d: %.2f Mbit/s, %d retransmits, RTT %v, min %v", i, s.BitsPerSecond/1e6, s.Retransmits, s.RTT, s.MinRTT)
			if s.BitsPerSecond <= 0 {
				t.Errorf("stream %d carried nothing", i)
			}
			sum += s.BitsPerSecond
		}
		t.Logf("path: %.2f Mbit/s down over %d streams, %d retransmits", p.DownBitsPerSecond/1e6, len(p.TCPStreams), p.Retransmits)
		if len(p.TCPStreams) != 4 || sum < 0.999*p.DownBitsPerSecond || sum > 1.001*p.DownBitsPerSecond {
			t.Fatalf("%d streams summing to %.2f Mbit/s, want 4 summing to the total %.2f", len(p.TCPStreams), sum/1e6, p.DownBitsPerSecond/1e6)
		}
		if d := p.DownBitsPerSecond / 20e6; d > 1.1 {
			t.Fatalf("path down %.2f Mbit/s, more than the tbf's 20 and 10 %%", p.DownBitsPerSecond/1e6)
		}
		if best = max(best, p.DownBitsPerSecond); best >= 0.9*20e6 {
			return
		}
	}
	t.Errorf("path down %.2f Mbit/s at best of three, want the tbf's 20 within 10 %%", best/1e6)
}
