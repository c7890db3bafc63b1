package rules

import (
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// TestPathLossItem: packet-loss's evidence gains the path's own loss
// when run probed it, and only then.
func TestPathLossItem(t *testing.T) {
	b := bundle(nil, traffic(10000, 500, 0))
	probed := &Input{Bundle: b, Run: &evidence.Run{Path: &evidence.PathProbe{UDPSent: 1500, UDPLossPercent: 1.8, DownBitsPerSecond: 20e6, Retransmits: 12}}}
	fs := checkLoss(probed)
	if len(fs) != 1 || !hasEvidence(fs[0], "1.8 % loss on the path itself, measured without the server's load (1500 UDP datagrams") ||
		!hasEvidence(fs[0], "12 retransmissions in the probe's bulk TCP") {
		t.Errorf("with a probe: %q", evidenceTexts(fs[0]))
	}
	probed.Run.Path.UDPDownSent, probed.Run.Path.UDPDownLossPercent = 1000, 4.2
	if fs := checkLoss(probed); !hasEvidence(fs[0], "(1500 UDP datagrams from the client to the server); 4.2 % of 1000 UDP datagrams from the server to the client; 12 retransmissions") {
		t.Errorf("with both directions: %q", evidenceTexts(fs[0]))
	}
	probed.Run.Path.TCPStreams = make([]evidence.PathStream, 4)
	if fs := checkLoss(probed); !hasEvidence(fs[0], "12 retransmissions in the probe's bulk TCP from the server (4 streams)") {
		t.Errorf("with 4 streams: %q", evidenceTexts(fs[0]))
	}
	for _, in := range []*Input{{Bundle: b}, {Bundle: b, Run: &evidence.Run{}}, {Bundle: b, Run: &evidence.Run{Path: &evidence.PathProbe{Error: "refused"}}}} {
		fs := checkLoss(in)
		if len(fs) != 1 || hasEvidence(fs[0], "path") {
			t.Errorf("without a probe: %q", evidenceTexts(fs[0]))
		}
	}
}

// TestPathBandwidthItem: the responses against the path's capacity.
func TestPathBandwidthItem(t *testing.T) {
	in := &Input{Run: &evidence.Run{Load: &load.Result{BytesPerSec: 180e6 / 8}, Path: &evidence.PathProbe{DownBitsPerSecond: 20e6}}}
	it, ok := pathBandwidthItem(in)
	if want := "responses need 180 Mbit/s, the path carries 20 Mbit/s from the server to the client"; !ok || len(it.Text) < len(want) || it.Text[:len(want)] != want {
		t.Errorf("item = %q, %v; want it to begin %q", it.Text, ok, want)
	}
	in.Run.Path.TCPStreams = make([]evidence.PathStream, 4)
	if it, _ := pathBandwidthItem(in); !strings.Contains(it.Text, "(bulk TCP on 4 streams, summed, through") {
		t.Errorf("with 4 streams, item = %q", it.Text)
	}
	if _, ok := pathBandwidthItem(&Input{Run: &evidence.Run{Load: in.Run.Load}}); ok {
		t.Error("an item without a probe")
	}
}
