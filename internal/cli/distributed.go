package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/kubejob"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// workerOpts are the flags of one worker of a distributed load: its
// share (--segment) and the common start (--start-at). docs/distributed.md.
type workerOpts struct {
	segment string
	base    int
	startAt string
	raw     string // (debug) every response's latency, one per line
	// measure is the warm-up after which the result's measured part
	// begins: capacity --workers's steps (not for users: a step's
	// worker).
	measure time.Duration
}

// debugPrefix marks a flag for tests: not in the help, the man page or
// the completion.
const debugPrefix = "(debug) "

func workerFlags(fs *flag.FlagSet, raw bool) *workerOpts {
	w := &workerOpts{}
	fs.StringVar(&w.segment, "segment", "", "send share i of N of the load (connections, -R, -n), i from 1; for netdoctor merge (docs/distributed.md)")
	fs.IntVar(&w.base, "segment-base", 1, "what --segment's first i is: 1, or 0 for Kubernetes' JOB_COMPLETION_INDEX")
	fs.StringVar(&w.startAt, "start-at", "", "wait until this wall-clock time (RFC 3339, e.g. 2026-11-28T17:00:00.000Z) and start then, with the other workers")
	if raw {
		fs.StringVar(&w.raw, "debug-raw-latencies", "", debugPrefix+"write every response's latency in µs, one per line, to this file")
		fs.Var(durationFlag{&w.measure}, "debug-measure-from", debugPrefix+"the result's measured part (with its histogram) begins this long after the start: a capacity --workers step")
	}
	return w
}

// hidden reports a flag for tests alone.
func hidden(f *flag.Flag) bool { return strings.HasPrefix(f.Usage, debugPrefix) }

// apply gives o this worker's share and start. now is when the command
// line was read: a start more than a second before it, or more than an
// hour after, is refused.
func (w *workerOpts) apply(o *load.Options, now time.Time) error {
	if w.segment != "" {
		if w.base != 0 && w.base != 1 {
			return badInput("--segment-base %d: 1, or 0 for JOB_COMPLETION_INDEX", w.base)
		}
		s, err := load.ParseSegment(w.segment, w.base)
		if err != nil {
			return badInput("--%v", err)
		}
		if *o, err = s.Share(*o); err != nil {
			return badInput("--segment %s: %s", w.segment, strings.TrimPrefix(err.Error(), load.ErrInvalid.Error()+": "))
		}
		if o.Segment == nil { // 1/1: a worker all the same
			o.Segment = &s
		}
	}
	if w.startAt != "" {
		at, err := time.Parse(time.RFC3339Nano, w.startAt)
		if err != nil {
			return badInput("--start-at %q: want an RFC 3339 time, e.g. %s", w.startAt, now.UTC().Add(time.Minute).Truncate(time.Second).Format(time.RFC3339Nano))
		}
		if err := load.CheckStartAt(at, now); err != nil {
			return badInput("--start-at: %v", err)
		}
		o.StartAt = at
	}
	o.RawLatencies = w.raw != ""
	if w.measure > 0 {
		o.Measure = w.measure
	}
	return nil
}

// writeRaw writes the raw latencies (--debug-raw-latencies).
func (w *workerOpts) writeRaw(stdout io.Writer, res *load.Result) error {
	if w.raw == "" {
		return nil
	}
	return writeOut(w.raw, stdout, "raw latencies", func(out io.Writer) error {
		b := bufio.NewWriter(out)
		for _, v := range res.RawLatencies() {
			b.WriteString(strconv.FormatInt(v, 10))
			b.WriteByte('\n')
		}
		return b.Flush()
	})
}

func runMerge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("merge", stderr)
	jsonOut := fs.String("json", "", "write the merged result as JSON to this file (- for stdout, and the text to stderr), as load --json does")
	var latency bool
	fs.BoolVar(&latency, "latency", false, "print the latency distribution")
	fs.BoolVar(&latency, "L", false, "same as --latency")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return badInput("merge needs the workers' results: netdoctor merge worker-1.json worker-2.json … (or one file of kubectl logs' concatenated results)")
	}
	if err := checkOutput("json", *jsonOut); err != nil {
		return err
	}
	var rs []*load.Result
	for _, p := range pos {
		got, err := readResults(p)
		if err != nil {
			return err
		}
		rs = append(rs, got...)
	}
	m, err := load.Merge(rs)
	if err != nil {
		return badInput("merge: %v", err)
	}
	text := stdout
	if *jsonOut == "-" {
		text = stderr
	}
	if err := report.WrkText(text, m, latency); err != nil {
		return err
	}
	if err := report.WorkersText(text, m); err != nil {
		return err
	}
	if *jsonOut != "" {
		return writeOut(*jsonOut, stdout, "result", indentedJSON(report.NewLoad(m, rules.LoadGen(m))))
	}
	return nil
}

// readResults reads the load reports in a file: one, as load --json
// writes it, or several one after the other, as `kubectl logs` of the
// workers' pods prints them.
func readResults(path string) ([]*load.Result, error) {
	f, err := openData(path)
	if err != nil {
		return nil, badInput("read result %s: %v", path, dataError(err))
	}
	defer f.Close()
	b, err := io.ReadAll(capped.Reader(f, capped.Report, "results"))
	if err != nil {
		return nil, badInput("read result %s: %v", path, dataError(err))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var out []*load.Result
	for i := 1; ; i++ {
		var doc json.RawMessage
		at := dec.InputOffset()
		if err := dec.Decode(&doc); err == io.EOF {
			break
		} else if err != nil {
			// A pod that failed logged its one-line error where its
			// result would be: say what is there.
			rest := bytes.TrimLeft(b[at:], " \t\r\n")
			line, _, _ := bytes.Cut(rest, []byte("\n"))
			return nil, badInput("read result %s: document %d is not a result: %q (%v)", path, i, line[:min(len(line), 160)], err)
		}
		r, err := report.Read(bytes.NewReader(doc))
		if err != nil {
			return nil, readReportError(path, err)
		}
		// A run's report holds its load: a worker's (run --segment)
		// merges as a load's; its findings stay in it.
		if r.Load == nil || r.Command != "load" && (r.Command != "run" || r.Load.Segment == nil) {
			return nil, badInput("read result %s: document %d is a %s report, not a load's result (load --json) nor a worker's run (run --segment --json)", path, i, r.Command)
		}
		out = append(out, r.Load)
	}
	if len(out) == 0 {
		return nil, badInput("read result %s: empty", path)
	}
	return out, nil
}

// kubeOpts are the flags that print a load's workers as a Kubernetes
// Indexed Job instead of running it (--workers N --kubernetes).
type kubeOpts struct {
	workers    int
	kubernetes bool
	name, ns   string
	image      string
	margin     time.Duration
}

func kubeFlags(fs *flag.FlagSet) *kubeOpts {
	k := &kubeOpts{}
	fs.IntVar(&k.workers, "workers", 0, "with --kubernetes: the number of worker pods, each sending 1/N of the load")
	fs.BoolVar(&k.kubernetes, "kubernetes", false, "print the load as a Kubernetes Indexed Job of --workers pods (kubectl apply -f -) instead of running it; docs/distributed.md")
	fs.StringVar(&k.name, "job-name", "netdoctor-load", "with --kubernetes: the Job's name")
	fs.StringVar(&k.ns, "namespace", "", "with --kubernetes: the Job's namespace (default: kubectl's)")
	fs.StringVar(&k.image, "image", kubejob.Image, "with --kubernetes: the workers' image (the agent's)")
	fs.Var(durationFlag{&k.margin}, "start-margin", "with --kubernetes: how long after printing the workers start together: time to apply the Job, schedule the pods and pull the image (default 2m)")
	return k
}

// on reports whether the command prints a Job rather than running.
func (k *kubeOpts) on() bool { return k.kubernetes || k.workers != 0 }

// maxWorkers bounds --workers: the pods' logs are merged in one process.
const maxWorkers = 1000

// print writes the Job that runs cmd's load o (checked, not yet shared)
// on --workers pods.
func (k *kubeOpts) print(stdout io.Writer, cmd string, o load.Options, w *workerOpts, now time.Time) error {
	switch {
	case !k.kubernetes:
		return badInput("--workers %d: workers run as a Kubernetes Job (add --kubernetes); on hosts of your own, start N processes with --segment i/N and one --start-at (docs/distributed.md)", k.workers)
	case k.workers < 1 || k.workers > maxWorkers:
		return badInput("--workers %d: want 1 to %d worker pods", k.workers, maxWorkers)
	case w.segment != "" || w.startAt != "" || w.raw != "":
		return badInput("--kubernetes sets each worker's --segment and --start-at itself")
	case o.Script != nil:
		return badInput("--kubernetes: a --script is a file on this host, not in the workers' image")
	}
	share, err := load.Segment{Index: 1, Count: k.workers}.Share(o)
	if err != nil {
		return badInput("--workers %d: %s", k.workers, strings.TrimPrefix(err.Error(), load.ErrInvalid.Error()+": "))
	}
	margin := k.margin
	if margin == 0 {
		margin = 2 * time.Minute
	}
	if margin < 10*time.Second || margin > load.MaxStartAhead {
		return badInput("--start-margin %v: want 10s to %v", margin, load.MaxStartAhead)
	}
	dur := o.Duration
	if dur == 0 {
		dur = 10 * time.Second
	}
	start := now.Add(margin).UTC().Truncate(time.Second)
	job, err := kubejob.New(kubejob.Spec{Name: k.name, Namespace: k.ns, Image: k.image, Workers: k.workers,
		Args: append([]string{cmd}, loadArgs(o)...), Target: o.URL, StartAt: start, Run: dur + o.Timeout,
		Threads: share.Threads, Connections: share.Connections}, now)
	if err != nil {
		return badInput("--kubernetes: %v", err)
	}
	y, err := job.YAML()
	if err != nil {
		return err
	}
	sel := "netdoctor.io/job=" + k.name
	nsArg := ""
	if k.ns != "" {
		nsArg = " -n " + k.ns
	}
	_, err = fmt.Fprintf(stdout, "# netdoctor %s as %d workers, each 1/%d of the load, all starting at %s\n"+
		"# (apply it now: a worker that starts later than a second after that fails, and the merge names it missing).\n"+
		"#   kubectl apply%s -f job.yaml\n#   kubectl wait%s --for=condition=complete --timeout=%ds job/%s\n"+
		"#   kubectl logs%s -l %s --tail=-1 --max-log-requests=%d > results.json\n#   netdoctor merge results.json\n---\n%s",
		cmd, k.workers, k.workers, start.Format(time.RFC3339), nsArg, nsArg, job.Spec.ActiveDeadlineSeconds, k.name, nsArg, sel, k.workers, y)
	return err
}
