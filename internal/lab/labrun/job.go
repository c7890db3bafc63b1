package labrun

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/run"
)

// Job is one measurement the lab has netdoctor make from its client
// namespace: a run or a capacity search, either of them verifying a
// plan, and where its reports go. It is typed data, the options `run`
// and `capacity` build from their flags, handed to a child as JSON on
// its stdin (Measure) and run by `netdoctor lab measure` through
// the commands' own code: no command line is built by hand, so a
// renamed flag cannot break the lab. Parent and child are the same
// binary, hence no version.
type Job struct {
	// Run is a run (run.Run); Capacity a capacity search. Exactly one
	// is set.
	Run      *run.Options      `json:",omitempty"`
	Capacity *capacity.Options `json:",omitempty"`
	// Verify, when set, is the plan (tune.Plan's file) the measurement
	// verifies: measured, applied, measured again, rolled back (run's
	// and capacity's --verify-with).
	Verify  string `json:",omitempty"`
	Reports Outputs
}

// Outputs are where a job's reports are written, as run's and
// capacity's --json, --html and --bundle write them; "" for none.
type Outputs struct {
	JSON   string `json:",omitempty"`
	HTML   string `json:",omitempty"`
	Bundle string `json:",omitempty"`
	// TwinJSON is the run's report from its twin agent
	// (run.Options.ServerTwin).
	TwinJSON string `json:",omitempty"`
}

// maxJob bounds a job read: a few KiB of options.
const maxJob = 1 << 20

// ReadJob reads a job as Measure writes it.
func ReadJob(r io.Reader) (*Job, error) {
	dec := json.NewDecoder(capped.Reader(r, maxJob, "lab job"))
	dec.DisallowUnknownFields()
	var j Job
	if err := dec.Decode(&j); err != nil {
		return nil, fmt.Errorf("lab job: %w", err)
	}
	if (j.Run == nil) == (j.Capacity == nil) {
		return nil, errors.New("lab job: want a run or a capacity search, exactly one")
	}
	if j.Capacity != nil && j.Reports.Bundle != "" {
		return nil, errors.New("lab job: a capacity search writes no bundle")
	}
	if (j.Run == nil || j.Run.ServerTwin == nil) != (j.Reports.TwinJSON == "") {
		return nil, errors.New("lab job: a twin agent's report wants a run with a twin agent, and the other way round")
	}
	return &j, nil
}
