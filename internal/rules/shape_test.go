package rules

import (
	"slices"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// series builds a load timeline from per-second rps and a bundle whose
// counter rises by the given per-second amounts, one snapshot a second.
func series(rps []uint64, counter string, rise []uint64) ([]load.Second, *evidence.Bundle) {
	var tl []load.Second
	b := &evidence.Bundle{}
	v := uint64(1000)
	snap := func(at time.Time, v uint64) evidence.Snapshot {
		s := evidence.Snapshot{Time: at, Counters: map[string]uint64{"Tcp.RetransSegs": 5, "TcpExt.ListenOverflows": 0},
			Conntrack: &evidence.Conntrack{Stats: map[string]uint64{"drop": 0}}}
		if counter == "conntrack.drop" {
			s.Conntrack.Stats["drop"] = v
		} else {
			s.Counters[counter] = v
		}
		return s
	}
	b.Snapshots = append(b.Snapshots, snap(t0, v))
	for i, r := range rps {
		tl = append(tl, load.Second{Index: i, Start: t0.Add(time.Duration(i) * time.Second), Length: time.Second, Requests: r})
		v += rise[i]
		b.Snapshots = append(b.Snapshots, snap(t0.Add(time.Duration(i+1)*time.Second), v))
	}
	return tl, b
}

func TestShape(t *testing.T) {
	// Seed 002: throughput climbs, collapses when conntrack drops, climbs.
	tl, b := series([]uint64{300, 310, 20, 290, 305, 15, 300, 298},
		"conntrack.drop", []uint64{0, 0, 170, 0, 0, 180, 0, 0})
	sh := analyse(tl, b)
	if sh.Pattern != "saw-tooth" || !slices.Equal(sh.Seconds, []int{2, 5}) || !slices.Equal(sh.MovedWith, []string{"conntrack.drop"}) {
		t.Errorf("saw-tooth: %+v", sh)
	}

	tl, b = series([]uint64{1000, 990, 1010, 1000, 300, 310, 290, 300},
		"TcpExt.ListenOverflows", []uint64{0, 0, 0, 0, 400, 380, 420, 390})
	sh = analyse(tl, b)
	if sh.Pattern != "step" || sh.Seconds[0] != 4 || !slices.Equal(sh.MovedWith, []string{"TcpExtListenOverflows"}) {
		t.Errorf("step: %+v", sh)
	}

	tl, b = series([]uint64{1000, 980, 1020, 1000, 990, 1010}, "TcpExt.ListenOverflows", []uint64{0, 0, 0, 0, 0, 0})
	if sh = analyse(tl, b); sh.Pattern != "steady" || len(sh.MovedWith) != 0 {
		t.Errorf("steady: %+v", sh)
	}
	if sh = analyse(tl[:2], b); sh.Pattern != "steady" {
		t.Errorf("short: %+v", sh)
	}

	// The shape is the finding's whose counter moved, and shown as its
	// evidence.
	fs := []report.Finding{{ID: "conntrack-table-full", Evidence: []report.Item{{Source: "conntrack.drop"}}}, {ID: "cpu-saturated", Evidence: []report.Item{{Source: "/proc/stat"}}}}
	tieShape(fs, report.Shape{Pattern: "saw-tooth", MovedWith: []string{"conntrack.drop"}, Text: "saw"})
	if fs[0].Shape == nil || len(fs[0].Evidence) != 1 || len(fs[0].Shown()) != 2 || fs[0].Shown()[1].Source != "timeline" || fs[1].Shape != nil {
		t.Errorf("tieShape: %+v", fs)
	}
}
