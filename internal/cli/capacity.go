package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/kubejob"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
)

// sloFlags collects repeated --slo values.
type sloFlags []string

func (s *sloFlags) String() string     { return strings.Join(*s, ", ") }
func (s *sloFlags) Set(v string) error { *s = append(*s, v); return nil }

// capacityLoadFlags are the request flags capacity shares with load and
// run: what to send and how. The rate, the duration and the number of
// requests are the search's own.
func capacityLoadFlags(fs *flag.FlagSet) *loadOpts {
	lo := &loadOpts{}
	o := &lo.o
	wrkIntVar(fs, &o.Connections, 0, "the most connections a step may open (default: enough for the rate at twice the SLO's bound, opened as requests need them)", "c", "connections")
	wrkIntVar(fs, &o.Threads, 2, "event-loop threads", "t", "threads")
	wrkDurationVar(fs, &o.Timeout, 2*time.Second, "a request without a complete response by then is a timeout error (a bare number is seconds)", "timeout", "T")
	fs.BoolVar(&o.NoKeepAlive, "no-keepalive", false, "a new connection per request, closed after the response")
	fs.Var((*headerFlags)(&o.Header), "H", "request header 'Name: value' (repeatable)")
	fs.Var((*headerFlags)(&o.Header), "header", "same as -H")
	fs.StringVar(&o.Method, "m", "GET", "request method")
	fs.StringVar(&o.Method, "method", "GET", "same as -m")
	fs.StringVar(&lo.body, "body", "", "request body")
	fs.StringVar(&lo.bodyFile, "body-file", "", "read the request body from this file")
	fs.StringVar(&lo.script, "script", "", "wrk's Lua script (wrk's API; arguments after the URL or after -- go to init)")
	fs.StringVar(&lo.script, "s", "", "same as --script")
	fs.StringVar(&lo.jsonOut, "json", "", "write the report as JSON to this file (- for stdout, and the text to stderr)")
	engineFlag(fs, lo)
	return lo
}

func runCapacity(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("capacity", stderr)
	lo := capacityLoadFlags(fs)
	var o capacity.Options
	var slos sloFlags
	fs.Var(&slos, "slo", "an objective every step must meet: pNN<=DURATION of every request's latency (p99<=100ms; repeatable, or comma-separated), errors<=N% (default p99<=500ms, errors<=0.1%)")
	durationVar(fs, &o.MaxDuration, "max-duration", 2*time.Minute, "the whole search's time, the diagnosis included (with --verify-with, both searches and the plan's apply)")
	durationVar(fs, &o.Step, "step", 0, "each step's length, its warm-up included (default: fitted to --max-duration, 5s for 2m)")
	fs.Float64Var(&o.MinRate, "min-rate", 1, "the lowest rate tried, requests/s")
	fs.Float64Var(&o.MaxRate, "max-rate", 0, "the highest rate tried, requests/s (default: no limit)")
	serverNS := fs.String("server-netns", "", "the server's network namespace (name or path), observed in the diagnosis; default: this one when the target is local")
	var ag agentFlags
	ag.register(fs, "server-agent", "the server's side from `netdoctor agent` at this URL (http(s)://HOST:9120), over the network")
	fs.BoolVar(&o.Run.NoPathProbe, "no-path-probe", false, "with --server-agent: skip the probe of the path through the agent's test endpoint before the diagnosis")
	fs.BoolVar(&o.Run.DNS, "dns", false, "also probe the configured nameservers once per side in the diagnosis")
	fs.BoolVar(&o.NoDiagnosis, "no-diagnosis", false, "skip the diagnosis of the knee (what limited the capacity, the headroom)")
	htmlOut := fs.String("html", "", "also write a self-contained HTML report with the rate-vs-latency curve to this file")
	verify := fs.String("verify-with", "", "search, apply this tune plan, search again with the same load, then roll back: the capacity before → after")
	failBelow := fs.Float64("fail-below", 0, "exit 1 when the capacity is below this many requests/s")
	cl := registerCluster(fs, "capacity", "send each step from this many worker processes on this host (load --segment i/N, one start), judged on their merged result, or with --kubernetes as worker pods; docs/distributed.md")
	workers, kube := &cl.workers, &cl.kubernetes
	pos, err := parse(fs, splitShort(args, "ctHms"), stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 && (lo.script == "" || len(pos) == 0) {
		return badInput("capacity needs exactly one URL, e.g. netdoctor capacity --slo 'p99<=100ms' http://127.0.0.1:8080/ (with -s, the script's arguments may follow it)")
	}
	lo.o.URL = pos[0]
	lo.o.ScriptArgs = pos[1:]
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["connections"] {
		set["c"] = true
	}
	if set["c"] && lo.o.Connections < 1 {
		return badInput("-c %d: need at least one connection", lo.o.Connections)
	}
	if err := lo.check(set); err != nil {
		return err
	}
	if o.SLO, err = capacity.ParseSLO(slos); err != nil {
		return usageError{err}
	}
	switch {
	case o.MaxDuration <= 0:
		return badInput("--max-duration %v: must be positive", o.MaxDuration)
	case o.Step < 0 || set["step"] && o.Step < time.Second:
		return badInput("--step %v: at least 1s", o.Step)
	case o.MinRate <= 0:
		return badInput("--min-rate %g: must be positive", o.MinRate)
	case o.MaxRate < 0 || o.MaxRate > 0 && o.MaxRate < o.MinRate:
		return badInput("--max-rate %g: must be at least --min-rate %g", o.MaxRate, o.MinRate)
	case *failBelow < 0:
		return badInput("--fail-below %g: must not be negative", *failBelow)
	}
	if cl.printing() {
		if err := hostOnly(set); err != nil {
			return err
		}
	}
	if ag.url != "" && *serverNS != "" {
		return badInput("--server-agent and --server-netns are two ways to observe the server: pick one")
	}
	if o.Run.ServerAgent, err = ag.config(); err != nil {
		return err
	}
	if o.Run.ServerNetNS, err = netns.Resolve(*serverNS); err != nil {
		return err
	}
	if o.Run.ServerAgent != nil && *verify != "" {
		return badInput("--verify-with changes the server's host: run it there, with --server-netns or locally")
	}
	o.Load = lo.o
	switch {
	case *kube && *workers < 1:
		return badInput("--kubernetes needs --workers N")
	case *workers < 0 || *workers > maxWorkers:
		return badInput("--workers %d: want 1 to %d workers", *workers, maxWorkers)
	case *workers > 0 && lo.script != "":
		return badInput("--workers: a --script's state (its counters, its responses) is one process's; run the search without --workers")
	case *workers > 0 && *verify != "":
		return badInput("--workers with --verify-with is not supported: run the two searches with --workers yourself")
	case *workers > 0 && set["c"] && lo.o.Connections < *workers:
		return badInput("-c %d: each of --workers %d needs a connection at least", lo.o.Connections, *workers)
	case *kube && cl.api == "":
		return printController(stdout, "capacity", args, set, kubejob.ControllerSpec{Name: cl.name, Namespace: cl.ns, Image: cl.image, Run: o.MaxDuration})
	case *kube || cl.api != "":
		cw, err := cl.client()
		if err != nil {
			return err
		}
		o.Steps = cw
	case *workers > 1:
		o.Steps = capacityWorkers(*workers)
	}
	return doCapacity(ctx, capacityJob{o: o, json: lo.jsonOut, html: *htmlOut, verify: *verify, failBelow: *failBelow}, stdout, stderr)
}

// capacityJob is a capacity search once its options are read: `capacity`
// makes one of its flags, `lab measure` of the lab's typed job
// (labrun.Job), and both run it through doCapacity.
type capacityJob struct {
	o          capacity.Options
	json, html string // the reports' files (--json, --html); "-" is stdout
	verify     string // --verify-with: the plan to verify
	failBelow  float64
}

// doCapacity runs j: the search (or, with a plan, the searches before
// and after it) and its reports.
func doCapacity(ctx context.Context, j capacityJob, stdout, stderr io.Writer) error {
	if err := oneStdout("json", j.json, "html", j.html); err != nil {
		return err
	}
	o := j.o
	// The target first, as load and run do: a closed port answers at
	// once, not after the search's first steps.
	if err := probeTarget(ctx, o.Load); err != nil {
		return err
	}
	text := textOut(j.json, stdout, stderr)
	p := newProgress(stderr, 0, false)
	o.OnPhase = p.phase
	o.OnStep = func(s report.Step) {
		p.done()
		fmt.Fprintf(text, "  %s\n", stepLine(o.SLO, s))
	}
	if j.verify != "" {
		return capacityVerify(ctx, o, j, stdout, stderr, text)
	}
	fmt.Fprintf(text, "Searching the capacity of %s within %s, for %s at most:\n", o.Load.URL, o.SLO.Text, o.MaxDuration)
	switch w := o.Steps.(type) {
	case capacity.Workers:
		fmt.Fprintf(text, "  each step sent by %d worker processes (load --segment i/%d, one start), judged on their merged result\n", w.N, w.N)
	case *clusterWorkers:
		fmt.Fprintf(text, "  each step sent by an Indexed Job of %d worker pods in namespace %s (load --segment i/%d, one start %s after the Job is created), judged on their merged result\n",
			w.n, w.api.Namespace(), w.n, w.lead)
	}
	res, err := capacity.Search(ctx, o)
	p.done()
	if err != nil {
		return capacityErr(err)
	}
	c := res.Report
	if j.json != "-" {
		fmt.Fprintln(text)
		if err := report.CapacityText(stdout, c); err != nil {
			return err
		}
	}
	if j.json != "" {
		if err := writeOut(j.json, stdout, "report", indentedJSON(c)); err != nil {
			return err
		}
	}
	if j.html != "" {
		if err := writeOut(j.html, stdout, "HTML report", func(w io.Writer) error { return report.CapacityHTML(w, c) }); err != nil {
			return err
		}
		if j.json != "-" && j.html != "-" {
			fmt.Fprintf(stdout, "HTML report: %s\n", j.html)
		}
	}
	return belowCapacity(c, j.failBelow, stderr)
}

// afterPath is where the after search's page goes: NAME.after.html.
func afterPath(p string) string {
	if p == "-" {
		return p
	}
	if i := strings.LastIndex(p, "."); i > strings.LastIndex(p, "/") {
		return p[:i] + ".after" + p[i:]
	}
	return p + ".after"
}

// stepLine is a finished step as a line of progress.
func stepLine(slo report.SLO, s report.Step) string {
	r := "closed loop"
	if s.Rate > 0 {
		r = report.Rate(s.Rate) + " req/s"
	}
	parts := []string{fmt.Sprintf("step %d (%s) %s: goodput %s/s, success %s", s.N, s.Phase, r, report.Rate(s.Goodput), report.Percent(s.SuccessShare))}
	for _, ob := range slo.Objectives {
		if v, ok := s.At(ob.Percentile); ok {
			parts = append(parts, ob.Name()+" "+report.Dur(v))
		}
	}
	verdict := "met"
	switch {
	case s.Phase == "probe":
		verdict = "where to start"
	case !s.Pass:
		verdict = "broke: " + strings.Join(s.Broke, "; ")
	}
	return strings.Join(parts, ", ") + ": " + verdict
}

// belowCapacity is capacity's exit: 1 (as findings) when --fail-below
// says the capacity is too low, with a line on stderr saying so.
func belowCapacity(c *report.Capacity, failBelow float64, stderr io.Writer) error {
	if failBelow > 0 && c.CapacityRPS < failBelow {
		fmt.Fprintf(stderr, "netdoctor: capacity %s req/s is below --fail-below %s\n", report.Rate(c.CapacityRPS), report.Rate(failBelow))
		return errFindings
	}
	return nil
}

func capacityErr(err error) error {
	if errors.Is(err, capacity.ErrBudget) {
		return usageError{err}
	}
	return runErr(err)
}
