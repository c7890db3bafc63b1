package rules

import (
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// withLoad is a counter at second i of a bundle whose load starts after
// its third second: 0 until then, then per a second.
func withLoad(i, per int) uint64 {
	return uint64(per * max(0, i-3))
}

// TestBaseline: retransmits rising as fast before the load are
// background; overflows that start with the load are not.
func TestBaseline(t *testing.T) {
	start := t0.Add(3 * time.Second)
	b := &evidence.Bundle{}
	for i := 0; i <= 6; i++ {
		overflows := withLoad(i, 100)
		b.Snapshots = append(b.Snapshots, evidence.Snapshot{Time: t0.Add(time.Duration(i) * time.Second),
			Counters: map[string]uint64{"Tcp.RetransSegs": uint64(50 * i), "TcpExt.ListenOverflows": overflows}})
	}
	fs := []report.Finding{
		{ID: "packet-loss", Severity: report.Critical, Status: report.Active, Side: "server", Evidence: []report.Item{{Source: "Tcp.RetransSegs", Window: true}}},
		{ID: "accept-queue-overflow", Severity: report.Critical, Status: report.Active, Side: "server", Evidence: []report.Item{{Source: "TcpExt.ListenOverflows", Window: true}}},
	}
	baseline(fs, b, start, "server", nil)
	if b := fs[0].Background; fs[0].Severity != report.Warning || b == nil || b.Seconds != 3 || b.LoadFailed || fs[0].Shown()[1].Source != "baseline" {
		t.Errorf("background retransmits: %+v", fs[0])
	}
	if fs[1].Severity != report.Critical || fs[1].Background != nil {
		t.Errorf("load-driven overflows: %+v", fs[1])
	}
}

// TestBaselineOwnDrops: a listener that counts its own drops is judged by
// them. The namespace's overflows rise as fast before the load (a busy
// neighbour drops all along), but the served listener's own drops start
// with the load: its finding stays critical; the neighbour's, whose own
// drops rose as fast before, is background.
func TestBaselineOwnDrops(t *testing.T) {
	start := t0.Add(3 * time.Second)
	b := &evidence.Bundle{}
	for i := 0; i <= 6; i++ {
		served := withLoad(i, 60)
		b.Snapshots = append(b.Snapshots, evidence.Snapshot{Time: t0.Add(time.Duration(i) * time.Second),
			Counters: map[string]uint64{"TcpExt.ListenOverflows": uint64(70 * i)},
			Sockets: &evidence.Sockets{Listeners: []evidence.Listener{
				{Proto: "tcp", Addr: "127.0.0.1:8100", Port: 8100, Drops: served},
				{Proto: "tcp", Addr: "127.0.0.1:8000", Port: 8000, Drops: uint64(10 * i)},
			}}})
	}
	overflow := func(addr string) report.Finding {
		return report.Finding{ID: AcceptQueueOverflow, Severity: report.Critical, Status: report.Active, Side: "local",
			About: report.About{Listen: addr}, Evidence: []report.Item{{Source: "TcpExtListenOverflows", Window: true}}}
	}
	fs := []report.Finding{overflow("127.0.0.1:8100"), overflow("127.0.0.1:8000")}
	baseline(fs, b, start, "local", nil)
	if fs[0].Severity != report.Critical || fs[0].Background != nil {
		t.Errorf("the served listener's own drops began with the load: %+v", fs[0])
	}
	if fs[1].Severity != report.Warning || fs[1].Background == nil {
		t.Errorf("the neighbour dropped as fast before the load: %+v", fs[1])
	}
}
