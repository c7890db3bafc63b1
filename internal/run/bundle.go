package run

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// BundleKind marks a run's evidence bundle, as `run --bundle` writes it.
const BundleKind = "run"

// Bundle is everything a run observed (evidence.Run): both sides' snapshots
// from the baseline to the tail, the load's result and timeline, and the
// servers found behind the port with their samples and log counts.
// Diagnosing it again (Diagnose) gives the run's findings and report, so
// a run on a production host can be diagnosed elsewhere, and real runs
// serve as test fixtures.
type Bundle struct {
	Version int    `json:"version"`
	Kind    string `json:"kind"`
	*evidence.Run
}

// Bundle returns the run's evidence. A side sharing the other's
// namespace shares its snapshots: they are written once, with the side
// that took them.
func (res *Result) Bundle() *Bundle {
	run := *res.Run
	run.Sides = nil
	for _, s := range res.Sides {
		c := *s
		if c.SameAs != "" {
			c.Bundle = nil
		}
		run.Sides = append(run.Sides, &c)
	}
	return &Bundle{Version: evidence.BundleVersion, Kind: BundleKind, Run: &run}
}

// ReadBundle decodes a run bundle, of version 1 too (its load's status
// classes were "status").
func ReadBundle(r io.Reader) (*Bundle, error) {
	var b Bundle
	raw, err := io.ReadAll(capped.Reader(r, capped.Bundle, "run bundle"))
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		return nil, fmt.Errorf("not a netdoctor run bundle: %w", err)
	}
	if b.Kind != BundleKind || b.Version < 1 || b.Version > evidence.BundleVersion {
		return nil, fmt.Errorf("not a netdoctor run bundle (kind %q, version %d; this netdoctor reads version %d)", b.Kind, b.Version, evidence.BundleVersion)
	}
	if b.Run == nil || b.Load == nil {
		return nil, errors.New("run bundle without a load result")
	}
	if b.Version == 1 && b.Load.Status == nil {
		var v1 struct {
			Load json.RawMessage `json:"load"`
		}
		if json.Unmarshal(raw, &v1) == nil {
			b.Load.Status = load.StatusV1(v1.Load)
		}
	}
	for _, s := range b.Sides {
		if s == nil {
			return nil, errors.New("run bundle with an empty side")
		}
	}
	for _, s := range b.Sides {
		if s.SameAs == "" {
			continue
		}
		for _, o := range b.Sides {
			if o.Name == s.SameAs && o.SameAs == "" {
				s.Bundle = o.Bundle
			}
		}
	}
	for _, s := range b.Sides {
		s.Observed = s.Bundle != nil && len(s.Bundle.Snapshots) > 0
	}
	return &b, nil
}

// Diagnose runs the diagnosis of a run again on its evidence.
func Diagnose(b *Bundle) *Result { return diagnose(b.Run) }
