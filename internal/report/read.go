package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
)

// KindError is a JSON document that is not a report this netdoctor
// reads: another version, or no command it knows (a bundle, a plan).
type KindError struct {
	Version int
	Command string
}

func (e *KindError) Error() string {
	if e.Command != "" && e.Version > Version {
		return fmt.Sprintf("a netdoctor %s report of version %d, newer than this netdoctor reads (%d and before): use the netdoctor that wrote it", e.Command, e.Version, Version)
	}
	return fmt.Sprintf("not a netdoctor report (version %d, command %q)", e.Version, e.Command)
}

// Read decodes any report netdoctor writes, as a Run: a run report
// whole; a check or diagnose report without load, shape, sides or
// servers; a load report (`load --json`) as its load and findings. The
// command says which it was. A report of version 1 is read into version
// 2's vocabulary (upgradeV1), and one written before reports had a
// status gets the one its verdict says (OutcomeOf).
func Read(r io.Reader) (*Run, error) {
	b, err := io.ReadAll(capped.Reader(r, capped.Report, "report"))
	if err != nil {
		return nil, err
	}
	var top struct {
		Version int    `json:"version"`
		Command string `json:"command"`
		// A tune plan names its report's command too: its changes
		// tell it apart.
		Changes json.RawMessage `json:"changes"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a netdoctor report: %w", err)
	}
	if top.Changes != nil {
		return nil, &KindError{top.Version, ""}
	}
	if top.Version != Version && top.Version != 1 {
		return nil, &KindError{top.Version, top.Command}
	}
	switch top.Command {
	case "run", "check", "diagnose":
		out := &Run{Report: &Report{}}
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("not a netdoctor report: %w", err)
		}
		if top.Version == 1 {
			upgradeV1(b, out)
		}
		if out.Status == "" {
			out.Status = OutcomeOf(out.Verdict, out.Findings)
		}
		for i, f := range out.Findings {
			if f.Actions == nil && len(f.Fix) > 0 { // written before actions
				out.Findings[i].Actions = Advice(f.Fix...)
				out.FixesAsText = true
			}
		}
		if out.Actions == nil {
			out.Actions = Collect(out.Findings)
		}
		return out, nil
	case "load":
		var l Load
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("not a netdoctor report: %w", err)
		}
		if l.Result == nil {
			return nil, fmt.Errorf("not a netdoctor report: a load report without its load")
		}
		if top.Version == 1 && l.Status == nil {
			l.Status = load.StatusV1(b)
		}
		return &Run{Report: &Report{Version: Version, Command: l.Command, Findings: l.Findings, Actions: Collect(l.Findings)}, Load: l.Result}, nil
	}
	return nil, &KindError{top.Version, top.Command}
}

// upgradeV1 moves what version 1 named otherwise into version 2's
// fields: the status words ("warnings" is "degraded", "findings"
// "unhealthy"), the load's status classes ("status"), and the rates'
// counter names (dotted: "Tcp.PassiveOpens"). A listener's recv_q and
// send_q are read by evidence.Listener itself.
func upgradeV1(raw []byte, out *Run) {
	out.Version = Version
	if o, ok := v1Outcomes[out.Status]; ok {
		out.Status = o
	}
	if out.Load != nil && out.Load.Status == nil {
		var v1 struct {
			Load json.RawMessage `json:"load"`
		}
		if json.Unmarshal(raw, &v1) == nil {
			out.Load.Status = load.StatusV1(v1.Load)
		}
	}
	if len(out.Summary.Rates) > 0 {
		rates := make(map[string]float64, len(out.Summary.Rates))
		for k, v := range out.Summary.Rates {
			rates[evidence.Nstat(k)] = v
		}
		out.Summary.Rates = rates
	}
}
