package report

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capped"
)

// KindError is a JSON document that is not a report this netdoctor
// reads: another version, or no command it knows (a bundle, a plan).
type KindError struct {
	Version int
	Command string
}

func (e *KindError) Error() string {
	return fmt.Sprintf("not a netdoctor report (version %d, command %q)", e.Version, e.Command)
}

// Read decodes any report netdoctor writes, as a Run: a run report
// whole; a check or diagnose report without load, shape, sides or
// servers; a load report (`load --json`) as its load and findings. The
// command says which it was. A report written before reports had a
// status gets the one its verdict says (OutcomeOf).
func Read(r io.Reader) (*Run, error) {
	b, err := io.ReadAll(capped.Reader(r, capped.Report, "report"))
	if err != nil {
		return nil, err
	}
	var top struct {
		Version int    `json:"version"`
		Command string `json:"command"`
	}
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, fmt.Errorf("not a netdoctor report: %w", err)
	}
	if top.Version != Version {
		return nil, &KindError{top.Version, top.Command}
	}
	switch top.Command {
	case "run", "check", "diagnose":
		out := &Run{Report: &Report{}}
		if err := json.Unmarshal(b, out); err != nil {
			return nil, fmt.Errorf("not a netdoctor report: %w", err)
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
		return out, nil
	case "load":
		var l Load
		if err := json.Unmarshal(b, &l); err != nil {
			return nil, fmt.Errorf("not a netdoctor report: %w", err)
		}
		return &Run{Report: &Report{Version: l.Version, Command: l.Command, Findings: l.Findings}, Load: l.Result}, nil
	}
	return nil, &KindError{top.Version, top.Command}
}
