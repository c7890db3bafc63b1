package run

import (
	"context"
	"fmt"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/source"
)

// side is one end of a run and where its evidence comes from.
type side struct {
	name   report.Side
	ns     netns.NS
	src    source.Source // nil when not observed, or shared
	shared *side         // the server shares the client's namespace
	why    string
	rec    *source.Recorder
	remote *source.Remote // src, when it is an agent
}

// owner is the side whose source observes this one.
func (s *side) owner() *side {
	if s.shared != nil {
		return s.shared
	}
	return s
}

// source is where this side's evidence comes from, or nil.
func (s *side) source() source.Source { return s.owner().src }

func (s *side) close() {
	if s != nil && s.src != nil {
		s.src.Close()
	}
}

// evidence is the side as the rules see it, with its snapshots.
func (s *side) evidence() *evidence.RunSide {
	o := s.owner()
	sd := &evidence.RunSide{SideInfo: evidence.SideInfo{Name: s.name, NetNS: s.ns.String(), Why: s.why}}
	if o.rec != nil {
		sd.Bundle = o.rec.Bundle()
		sd.Observed = true
		if at, err := o.rec.Lost(); err != nil {
			sd.Lost = fmt.Sprintf("evidence ends at %s: %v", at.Format("15:04:05"), err)
			sd.LostAt = at
		}
	}
	if r := o.remote; r != nil {
		sd.Agent = r.URL()
		sd.ClockOffset, sd.ClockUncertainty = r.Clock()
	}
	if s.shared != nil {
		sd.Why = "same namespace as the client"
		if s.why != "" {
			sd.Why = s.why + ": same namespace as the client"
		}
		sd.SameAs = s.shared.name
	}
	return sd
}

// listeners lists the TCP listeners of the side's namespace, from one
// snapshot, for error messages.
func (s *side) listeners() string {
	src := s.source()
	if src == nil {
		return ""
	}
	snap := src.Snapshot(context.Background())
	if snap.Sockets == nil {
		return ""
	}
	var out []string
	for _, l := range snap.Sockets.Listeners {
		if l.Proto != "unix" {
			out = append(out, l.Addr)
		}
	}
	return strings.Join(out, ", ")
}
