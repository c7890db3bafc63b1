package rules

import (
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// TestBaseline: retransmits rising as fast before the load are
// background; overflows that start with the load are not.
func TestBaseline(t *testing.T) {
	start := t0.Add(3 * time.Second)
	b := &evidence.Bundle{}
	for i := 0; i <= 6; i++ {
		overflows := uint64(0)
		if i > 3 {
			overflows = uint64(100 * (i - 3))
		}
		b.Snapshots = append(b.Snapshots, evidence.Snapshot{Time: t0.Add(time.Duration(i) * time.Second),
			Counters: map[string]uint64{"Tcp.RetransSegs": uint64(50 * i), "TcpExt.ListenOverflows": overflows}})
	}
	fs := []report.Finding{
		{ID: "packet-loss", Severity: report.Critical, Status: report.Active, Side: "server", Evidence: []report.Item{{Source: "Tcp.RetransSegs", Window: true}}},
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Side: "server", Evidence: []report.Item{{Source: "TcpExt.ListenOverflows", Window: true}}},
	}
	baseline(fs, b, start, "server", nil)
	if fs[0].Severity != report.Warning || len(fs[0].Evidence) != 2 || fs[0].Evidence[1].Source != "baseline" {
		t.Errorf("background retransmits: %+v", fs[0])
	}
	if fs[1].Severity != report.Critical || len(fs[1].Evidence) != 1 {
		t.Errorf("load-driven overflows: %+v", fs[1])
	}
}
