package rules

import (
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

func clientBundle(t0 time.Time, delayedACKs uint64) *evidence.Bundle {
	return &evidence.Bundle{Snapshots: []evidence.Snapshot{
		{Time: t0.Add(-time.Second), Counters: map[string]uint64{"TcpExt.DelayedACKs": 100}},
		{Time: t0.Add(5 * time.Second), Counters: map[string]uint64{"TcpExt.DelayedACKs": 100 + delayedACKs}},
	}}
}

// clientRun is a run whose client side is b.
func clientRun(t0 time.Time, res *load.Result, b *evidence.Bundle) *evidence.Run {
	return &evidence.Run{Load: res, LoadStart: t0, LoadEnd: t0.Add(5 * time.Second),
		Sides: []*evidence.RunSide{{SideInfo: evidence.SideInfo{Name: report.Client, Observed: b != nil}, Bundle: b}}}
}

func TestNagle(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	stall := load.Latency{P50: 44 * time.Millisecond, P75: 47 * time.Millisecond}
	tests := []struct {
		name  string
		res   load.Result
		acks  uint64
		fires bool
	}{
		{"40 ms band, one delayed ACK per request", load.Result{Requests: 110, Bytes: 110 * 150, Latency: stall}, 108, true},
		{"fast server", load.Result{Requests: 50000, Bytes: 50000 * 150, Latency: load.Latency{P50: 300 * time.Microsecond, P75: 400 * time.Microsecond}}, 10, false},
		{"slow app, no delayed ACKs", load.Result{Requests: 110, Bytes: 110 * 150, Latency: stall}, 3, false},
		{"large responses", load.Result{Requests: 110, Bytes: 110 * (1 << 20), Latency: stall}, 108, false},
		{"too few requests", load.Result{Requests: 5, Bytes: 5 * 150, Latency: stall}, 5, false},
	}
	for _, tt := range tests {
		got := checkNagle(&Input{Run: clientRun(t0, &tt.res, clientBundle(t0, tt.acks))})
		if (len(got) == 1) != tt.fires {
			t.Errorf("%s: checkNagle() = %+v, want fires=%v", tt.name, got, tt.fires)
		}
	}
	if got := checkNagle(&Input{Run: clientRun(t0, nil, nil)}); got != nil {
		t.Errorf("checkNagle without a load = %v", got)
	}
	if got := checkNagle(&Input{}); got != nil {
		t.Errorf("checkNagle outside a run = %v", got)
	}
}
