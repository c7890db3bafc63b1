package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labrun"
	"github.com/netdoctor/netdoctor/internal/tune"
	"github.com/netdoctor/netdoctor/internal/tune/tunetest"
)

var capture = flag.String("capture", "", "run every lab case and write its run bundle and a recording of what tune plan reads to this directory (root; see testdata/runs/README.md)")

// captureCase is one lab built at one stage.
type captureCase struct {
	name  string // fixture name: scenario, ".sN" for a stage, ".fixed"
	sc    *lab.Scenario
	stage int
}

// captureCases are every scenario with all its faults and fixed, and
// each stage of the staged ones.
func captureCases() []captureCase {
	var out []captureCase
	for i := range lab.Scenarios {
		sc := &lab.Scenarios[i]
		out = append(out, captureCase{sc.Name, sc, 1})
		if len(sc.Stages) == 0 {
			continue
		}
		for st := 2; st <= len(sc.Stages); st++ {
			out = append(out, captureCase{sc.Name + ".s" + strconv.Itoa(st), sc, st})
		}
		out = append(out, captureCase{sc.Name + ".fixed", sc, sc.Fixed()})
	}
	return out
}

// TestCapture writes the fixtures of TestRunGolden from real labs:
// go test ./internal/cli -run TestCapture -capture testdata/runs.
func TestCapture(t *testing.T) {
	if *capture == "" {
		t.Skip("no -capture DIR")
	}
	labNeeds(t)
	dir, err := filepath.Abs(*capture)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range captureCases() {
		t.Run(c.name, func(t *testing.T) {
			if err := captureOne(dir, c); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func captureOne(dir string, c captureCase) (err error) {
	ctx := context.Background()
	e, err := lab.New("C" + strconv.Itoa(os.Getpid()%100000))
	if err != nil {
		return err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	tg, err := c.sc.Build(ctx, e, c.stage)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	report := filepath.Join(dir, c.name+".json")
	o := labrun.RunOptions(e, c.sc, tg, 0)
	j := labrun.Job{Run: &o, Reports: labrun.Outputs{JSON: report, Bundle: filepath.Join(dir, c.name+".bundle.json.gz")}}
	if err := labrun.Measure(ctx, e, j, io.Discard, io.Discard); err != nil {
		return err
	}
	in, err := readWith(report, "report", tune.ReadInput)
	if err != nil {
		return err
	}
	defer os.Remove(report)
	rec := &tunetest.Recorder{Of: tune.Live{}}
	if _, err := tune.Build(in, c.name+".json", rec); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return rec.Save(filepath.Join(dir, c.name+".host.json"))
}
