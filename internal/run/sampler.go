package run

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/collect"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// sampler snapshots one side every interval.
type sampler struct {
	name   report.Side
	netns  netns.NS
	snap   *collect.Snapshotter
	shared *sampler // the server shares the client's namespace
	why    string
	bundle *evidence.Bundle
}

func (s *sampler) run(ctx context.Context, interval time.Duration) {
	s.bundle = &evidence.Bundle{Version: evidence.BundleVersion, Host: s.snap.Host, Start: time.Now()}
	s.snap.Sample(ctx, interval, 0, func(snap evidence.Snapshot) {
		s.bundle.Snapshots = append(s.bundle.Snapshots, snap)
	})
	// The last snapshot is taken after the tail even when ctx ended.
	s.bundle.Snapshots = append(s.bundle.Snapshots, s.snap.Snapshot(context.Background()))
}

func (s *sampler) close() {
	if s.snap != nil {
		s.snap.Close()
	}
}

func (s *sampler) side() *rules.Side {
	src := s
	if s.shared != nil {
		src = s.shared
	}
	sd := &rules.Side{RunSide: report.RunSide{Name: s.name, NetNS: s.netns.String(), Observed: src.bundle != nil, Why: s.why}, Bundle: src.bundle}
	if s.shared != nil {
		sd.Why = "same namespace as the client"
		sd.SameAs = s.shared.name
	}
	return sd
}

// listeners lists the TCP listeners of the side's namespace, from one
// snapshot, for error messages.
func (s *sampler) listeners() string {
	src := s
	if s.shared != nil {
		src = s.shared
	}
	if src.snap == nil {
		return ""
	}
	snap := src.snap.Snapshot(context.Background())
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

// discover finds the applications behind the target port on this side,
// from one snapshot of its listeners. nil when the side is not observed.
func (s *sampler) discover(ctx context.Context, port string) *app.Observer {
	src := s
	if s.shared != nil {
		src = s.shared
	}
	if src.snap == nil {
		return nil
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return nil
	}
	snap := src.snap.Snapshot(ctx)
	if snap.Sockets == nil {
		return nil
	}
	return app.Discover(ctx, snap.Sockets.Listeners, p, src.netns)
}

// sampleApps samples the applications' workers every interval until ctx
// ends.
func sampleApps(ctx context.Context, obs *app.Observer, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		obs.Sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
