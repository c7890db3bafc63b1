package capacity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// Loader sends one step's load and returns its result, the measured part
// (load.Options.Measure) with every request's latency in it. The search
// judges the step on that alone, so a step sent by one process in this
// one (nil: load.Run) and one sent by several workers whose results are
// merged (Workers) are judged alike; a Kubernetes controller would be a
// third.
type Loader interface {
	Load(ctx context.Context, o load.Options) (*load.Result, error)
}

// Workers sends each step as N worker processes on this host, each
// `load --segment i/N --start-at T` with its share of the step's rate
// and connections, all starting at T; the step's result is their
// results merged (load.Merge): the merged histogram's percentiles, the
// counts summed, a worker that could not send its share named in
// SaturatedBy. The steps advance in lockstep: the next starts once
// every worker of this one has ended.
type Workers struct {
	N int
	// Command is the worker i/N's command line for the whole step o
	// (the worker takes its share itself), starting at start, its
	// result as JSON on stdout with its measured part from o.Measure.
	Command func(o load.Options, seg load.Segment, start time.Time) *exec.Cmd
	// Lead is how long after the step is launched the workers start:
	// time for each process to start, resolve the target and check it
	// answers. Default 700 ms.
	Lead time.Duration
}

// maxResult bounds a worker's result read back: its histograms are a
// few hundred buckets each, its timeline a few seconds.
const maxResult = 64 << 20

// Load runs the step o on w.N workers and merges their results.
func (w Workers) Load(ctx context.Context, o load.Options) (*load.Result, error) {
	lead := w.Lead
	if lead == 0 {
		lead = 700 * time.Millisecond
	}
	start := time.Now().Add(lead)
	rs := make([]*load.Result, w.N)
	errs := make([]error, w.N)
	var wg sync.WaitGroup
	for i := range w.N {
		seg := load.Segment{Index: i + 1, Count: w.N}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i], errs[i] = w.one(ctx, o, seg, start)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return load.Merge(rs)
}

// one runs worker seg and reads its result.
func (w Workers) one(ctx context.Context, o load.Options, seg load.Segment, start time.Time) (*load.Result, error) {
	cmd := w.Command(o, seg, start)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &capWriter{b: &out, left: maxResult}, &capWriter{b: &errOut, left: 4096}
	// The worker bounds its own load (-d); this bounds a worker that
	// hangs before it starts.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("worker %s: %v: %s", seg, err, lastLine(errOut.String()))
	}
	var r load.Result
	if err := json.NewDecoder(&out).Decode(&r); err != nil {
		return nil, fmt.Errorf("worker %s: its result: %v", seg, err)
	}
	return &r, nil
}

// capWriter keeps the first left bytes written and drops the rest.
type capWriter struct {
	b    *bytes.Buffer
	left int
}

func (c *capWriter) Write(p []byte) (int, error) {
	n := min(len(p), c.left)
	c.b.Write(p[:n])
	c.left -= n
	return len(p), nil
}

var _ io.Writer = (*capWriter)(nil)

// lastLine is a worker's error: the last line it printed.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return s
}
