package run

import (
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

func clientBundle(t0 time.Time, delayedACKs uint64) *evidence.Bundle {
	return &evidence.Bundle{Snapshots: []evidence.Snapshot{
		{Time: t0.Add(-time.Second), Counters: map[string]uint64{"TcpExt.DelayedACKs": 100}},
		{Time: t0.Add(5 * time.Second), Counters: map[string]uint64{"TcpExt.DelayedACKs": 100 + delayedACKs}},
	}}
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
		got := nagle(&tt.res, clientBundle(t0, tt.acks), t0)
		if (len(got) == 1) != tt.fires {
			t.Errorf("%s: nagle() = %+v, want fires=%v", tt.name, got, tt.fires)
		}
	}
	if got := nagle(nil, nil, t0); got != nil {
		t.Errorf("nagle(nil) = %v", got)
	}
}
