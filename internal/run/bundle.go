package run

import (
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// BundleKind marks a run's evidence bundle, as `run --bundle` writes it.
const BundleKind = "run"

// Bundle is everything a run observed: both sides' snapshots from the
// baseline to the tail, the load's result and timeline, and the servers
// found behind the port with their samples and log counts. Diagnosing it
// again (Diagnose) gives the run's findings and report, so a run on a
// production host can be diagnosed elsewhere, and real runs serve as
// test fixtures.
type Bundle struct {
	Version   int           `json:"version"`
	Kind      string        `json:"kind"`
	Port      string        `json:"port"`
	LoadStart time.Time     `json:"load_start"`
	LoadEnd   time.Time     `json:"load_end"`
	Load      *load.Result  `json:"load"`
	Sides     []*SideBundle `json:"sides"`
	Servers   []*app.Server `json:"servers,omitempty"`
}

// SideBundle is a side with its snapshots.
type SideBundle struct {
	*Side
	Bundle *evidence.Bundle `json:"bundle,omitempty"`
}

// Bundle returns the run's evidence.
func (res *Result) Bundle() *Bundle {
	b := &Bundle{Version: evidence.BundleVersion, Kind: BundleKind, Port: res.port, LoadStart: res.LoadStart, LoadEnd: res.LoadEnd,
		Load: res.Load, Servers: res.Servers}
	for _, s := range res.Sides {
		sb := &SideBundle{Side: s}
		// A side sharing the other's namespace shares its snapshots:
		// they are written once, with the side that took them.
		if s.Why != sameNamespace {
			sb.Bundle = s.Bundle
		}
		b.Sides = append(b.Sides, sb)
	}
	return b
}

// sameNamespace is why a server side is the client's.
const sameNamespace = "same namespace as the client"

// ReadBundle decodes a run bundle.
func ReadBundle(r io.Reader) (*Bundle, error) {
	var b Bundle
	if err := json.NewDecoder(r).Decode(&b); err != nil {
		return nil, fmt.Errorf("not a netdoctor run bundle: %w", err)
	}
	if b.Kind != BundleKind || b.Version < 1 || b.Version > evidence.BundleVersion {
		return nil, fmt.Errorf("not a netdoctor run bundle (kind %q, version %d; this netdoctor reads version %d)", b.Kind, b.Version, evidence.BundleVersion)
	}
	if b.Load == nil {
		return nil, fmt.Errorf("run bundle without a load result")
	}
	return &b, nil
}

// Diagnose runs the diagnosis of a run again on its evidence.
func Diagnose(b *Bundle) *Result {
	res := &Result{Load: b.Load, LoadStart: b.LoadStart, LoadEnd: b.LoadEnd, Servers: b.Servers, port: b.Port}
	var shared *evidence.Bundle
	for _, sb := range b.Sides {
		if sb.Side == nil {
			continue
		}
		if sb.Bundle != nil && shared == nil {
			shared = sb.Bundle
		}
	}
	for _, sb := range b.Sides {
		if sb.Side == nil {
			continue
		}
		s := *sb.Side
		s.Bundle = sb.Bundle
		if s.Why == sameNamespace {
			s.Bundle = shared
		}
		s.Observed = s.Bundle != nil
		res.Sides = append(res.Sides, &s)
	}
	res.Findings = diagnose(res)
	return res
}
