package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/kubejob"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
	"github.com/netdoctor/netdoctor/internal/source"
)

// agentFlags name an agent to observe through: its URL, the token file
// and, for https with a private CA, the CA's certificate.
type agentFlags struct {
	url, tokenFile, caFile string
	// tokenEnv names the environment variable holding the token: a
	// Kubernetes Secret's in a pod (secretKeyRef), whose files a
	// non-root container can read only through its group.
	tokenEnv string
	flag     string
}

func (a *agentFlags) register(fs *flag.FlagSet, name, usage string) {
	a.flag = name
	fs.StringVar(&a.url, name, "", usage)
	fs.StringVar(&a.tokenFile, "token-file", "", "with --"+name+": file holding the agent's bearer token (mode 0600)")
	fs.StringVar(&a.tokenEnv, "token-env", "", "with --"+name+": the environment variable holding the agent's bearer token instead (a Kubernetes Secret's, in a pod)")
	fs.StringVar(&a.caFile, "agent-ca", "", "with --"+name+" https://: the CA certificate (PEM) the agent's certificate chains to, instead of the system's")
}

// config is the agent to reach, or nil when none was named.
func (a *agentFlags) config() (*source.RemoteConfig, error) {
	if a.url == "" {
		if a.tokenFile != "" || a.caFile != "" || a.tokenEnv != "" {
			return nil, badInput("--token-file, --token-env and --agent-ca go with --%s", a.flag)
		}
		return nil, nil
	}
	if a.tokenFile != "" && a.tokenEnv != "" {
		return nil, badInput("--token-file and --token-env are two ways to give the token: pick one")
	}
	u, err := url.Parse(a.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return nil, badInput("--%s %q: want http(s)://HOST:PORT, e.g. http://10.0.0.2:9120", a.flag, a.url)
	}
	cfg := &source.RemoteConfig{URL: a.url, CAFile: a.caFile}
	if a.tokenFile != "" {
		tok, err := agentapi.ReadToken(a.tokenFile)
		if err != nil {
			return nil, usageError{err}
		}
		cfg.Token = tok
	}
	if a.tokenEnv != "" {
		v, ok := os.LookupEnv(a.tokenEnv)
		if !ok {
			return nil, badInput("--token-env %s: the variable is not set", a.tokenEnv)
		}
		tok, err := agentapi.ParseToken([]byte(v), "--token-env "+a.tokenEnv)
		if err != nil {
			return nil, usageError{err}
		}
		cfg.Token = tok
	}
	return cfg, nil
}

func runRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", stderr)
	lo := loadFlags(fs)
	wk := workerFlags(fs, false)
	// run's JSON is the whole report, not load's result: with "-" stdout
	// holds it alone, and the text report is not written at all.
	fs.Lookup("json").Usage = "also write the JSON report to this file; - writes it to stdout instead of the text report (progress and notes go to stderr)"
	var o run.Options
	serverNS := fs.String("server-netns", "", "the server's network namespace (name or path); default: this one when the target is local")
	var ag agentFlags
	ag.register(fs, "server-agent", "the server's side from `netdoctor agent` at this URL (http(s)://HOST:9120), over the network")
	durationVar(fs, &o.Baseline, "baseline", 3*time.Second, "quiet time sampled before the load")
	durationVar(fs, &o.Tail, "tail", 2*time.Second, "time sampled after the load")
	fs.BoolVar(&o.NoPathProbe, "no-path-probe", false, "with --server-agent: skip the few seconds' probe of the path (TCP throughput, RTT, UDP loss) through the agent's test endpoint before the load")
	dns := fs.Bool("dns", false, "also probe the configured nameservers once per side")
	htmlOut := fs.String("html", "", "also write a self-contained HTML report with per-second charts to this file")
	verify := fs.String("verify-with", "", "measure, apply this tune plan (kernel settings and configuration), measure again with the same load, then roll back")
	keep := fs.Bool("keep", false, "with --verify-with: keep the changes instead of rolling back")
	fail := registerFailOn(fs)
	bundleOut := fs.String("bundle", "", "also write the run's evidence (both sides' snapshots, the load, the servers, their on-CPU profile) to this file, gzip'd if it ends in .gz; `netdoctor diagnose` reads it back. The profile is also written beside it in pprof's format (FILE less .gz and .json, plus .pprof) for `go tool pprof`")
	fs.IntVar(&o.ProfileHz, "profile-hz", cpuprof.DefaultHz, "on-CPU profile of the servers (on this host) during the load, samples a second on each CPU; 0 for none")
	cl := registerCluster(fs, "run", "with --kubernetes: send the load from this many worker pods, each 1/N of it, judged on their merged result while this run samples the server; docs/distributed.md")
	pos, err := parse(fs, splitShort(args, "ctdnRHms"), stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 && (lo.script == "" || len(pos) == 0) {
		return badInput("run needs exactly one URL, e.g. netdoctor run -c 50 -d 10s http://127.0.0.1:8080/ (with -s, the script's arguments may follow it)")
	}
	lo.o.URL = pos[0]
	lo.o.ScriptArgs = pos[1:]
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if err := lo.check(set); err != nil {
		return err
	}
	if err := wk.apply(&lo.o, time.Now()); err != nil {
		return err
	}
	if o.ProfileHz < 0 || o.ProfileHz > cpuprof.MaxHz {
		return badInput("--profile-hz %d: want 0 (no profile) to %d", o.ProfileHz, cpuprof.MaxHz)
	}
	if o.Baseline < 0 || o.Tail < 0 {
		return badInput("--baseline and --tail must not be negative")
	}
	if o.Baseline == 0 && set["baseline"] {
		o.Baseline = time.Millisecond
	}
	o.DNS = *dns
	if cl.printing() {
		if err := hostOnly(set); err != nil {
			return err
		}
	}
	if ag.url != "" && *serverNS != "" {
		return badInput("--server-agent and --server-netns are two ways to observe the server: pick one")
	}
	if o.ServerAgent, err = ag.config(); err != nil {
		return err
	}
	if o.ServerNetNS, err = netns.Resolve(*serverNS); err != nil {
		return err
	}
	if o.ServerAgent != nil && *verify != "" {
		return badInput("--verify-with changes the server's host: run it there, with --server-netns or locally")
	}
	if *keep && *verify == "" {
		return badInput("--keep goes with --verify-with")
	}
	j := runJob{o: o, json: lo.jsonOut, html: *htmlOut, bundle: *bundleOut, verify: *verify, keep: *keep, fail: *fail,
		latency: lo.latency, timed: set["d"] || lo.o.Requests == 0}
	if cl.workers == 0 && !cl.kubernetes && cl.api == "" {
		j.o.Load = lo.o
		return doRun(ctx, j, stdout, stderr)
	}
	switch {
	case !cl.kubernetes:
		return badInput("--workers %d: a run's workers run as a Kubernetes Job (add --kubernetes); on hosts of your own, start N runs with --segment i/N and one --start-at (docs/distributed.md)", cl.workers)
	case cl.workers < 1 || cl.workers > maxWorkers:
		return badInput("--workers %d: want 1 to %d worker pods", cl.workers, maxWorkers)
	case set["segment"] || set["start-at"]:
		return badInput("--kubernetes sets each worker's --segment and --start-at itself")
	case lo.script != "":
		return badInput("--kubernetes: a --script is a file on this host, not in the workers' image")
	case *verify != "":
		return badInput("--kubernetes with --verify-with is not supported: the plan changes the server's host, the run's workers are pods")
	case cl.api == "":
		return printController(stdout, "run", args, set, kubejob.ControllerSpec{Name: cl.name, Namespace: cl.ns, Image: cl.image,
			Run: o.Tail + lo.o.Duration + lo.o.Timeout + time.Minute})
	}
	cw, err := cl.client()
	if err != nil {
		return err
	}
	// The workers start together once their pods are up; this run's
	// baseline lasts until then (run.Options.Loader).
	start := time.Now().Add(cw.lead)
	lo.o.StartAt = start
	job, err := cw.launch(ctx, cw.name+"-1", lo.o, start)
	if err != nil {
		return err
	}
	defer job.delete(ctx)
	j.o.Load = lo.o
	j.o.Loader = func(ctx context.Context, _ load.Options) (*load.Result, error) { return job.collect(ctx) }
	return doRun(ctx, j, stdout, stderr)
}

// runJob is a run once its options are read: `run` makes one of its
// flags, `lab measure` of the lab's typed job (labrun.Job), and both run it
// through doRun, the one way a run is made, written and exited.
type runJob struct {
	o                  run.Options
	json, html, bundle string // the reports' files (--json, --html, --bundle); "-" is stdout
	twinJSON           string // the twin agent's report (the lab's --agent-twin)
	verify             string // --verify-with: the plan to verify
	keep               bool
	fail               failOn
	latency            bool // the latency distribution in the text (--latency)
	timed              bool // the progress counts the load's duration down (no -n without -d)
}

// doRun runs j: the run (or, with a plan, its verification) and its
// reports.
func doRun(ctx context.Context, j runJob, stdout, stderr io.Writer) error {
	if err := oneStdout("json", j.json, "html", j.html, "bundle", j.bundle); err != nil {
		return err
	}
	if err := checkOutputs("json", j.json, "html", j.html, "bundle", j.bundle); err != nil {
		return err
	}
	text := textOut(j.json, stdout, stderr)
	j.o.Load.ScriptOut = text
	if j.o.Loader == nil { // a cluster's workers have ports of their own
		_ = connRoom(&j.o.Load, stderr)
	}
	if j.verify != "" {
		return runVerify(ctx, j, stdout, stderr)
	}
	p := newProgress(stderr, j.o.Load.Duration, j.timed)
	j.o.Load.OnSecond = p.second
	j.o.OnPhase = p.phase
	agentURL := ""
	if j.o.ServerAgent != nil {
		agentURL = j.o.ServerAgent.URL
	}
	lo := j.o.Load
	j.o.Load.OnStart = func() {
		fmt.Fprintf(text, "Running %s test @ %s, sampling %s every second\n", describe(lo), lo.URL, sidesText(j.o.ServerNetNS.String(), agentURL))
	}
	res, err := run.Run(ctx, j.o)
	p.done()
	if err != nil {
		return runErr(err)
	}
	r := res.Report()
	if j.json != "-" {
		if err := report.RunText(stdout, r, j.latency); err != nil {
			return err
		}
	}
	if res.Run != nil && res.Load != nil {
		if err := res.Load.ScriptDone(); err != nil {
			return usageError{err}
		}
	}
	if j.json != "-" && res.Load != nil {
		// A run whose workers were pods: each one's share and start.
		if err := report.WorkersText(stdout, res.Load); err != nil {
			return err
		}
	}
	if res.Run != nil && res.Load != nil && res.Load.Segment != nil {
		res.Load.KeepHistograms() // a worker's: for merge
	}
	if err := writeRun(j, res, r, stdout); err != nil {
		return err
	}
	if j.twinJSON != "" && res.Twin != nil {
		if err := writeRunJSON(j.twinJSON, stdout, res.Twin.Report()); err != nil {
			return err
		}
	}
	for _, s := range r.Sides {
		if s.Lost != "" {
			return fmt.Errorf("%w: the %s side's %s", errLost, s.Name, s.Lost)
		}
	}
	return exitFor(r.Findings, j.fail)
}

// writeRun writes a run's reports where j says: JSON, HTML, the bundle
// and its profile beside it.
func writeRun(j runJob, res *run.Result, r *report.Run, stdout io.Writer) error {
	if j.json != "" {
		if err := writeRunJSON(j.json, stdout, r); err != nil {
			return err
		}
	}
	if j.html != "" {
		if err := writeRunHTML(j.html, stdout, r, res); err != nil {
			return err
		}
		if j.json != "-" && j.html != "-" {
			fmt.Fprintf(stdout, "HTML report: %s\n", j.html)
		}
	}
	if j.bundle == "" {
		return nil
	}
	if err := writeOut(j.bundle, stdout, "bundle", gzipped(j.bundle, indentedJSON(evidence.RunFile(res.Run)))); err != nil {
		return err
	}
	if p := res.Profile; p != nil && len(p.PProf) > 0 && j.bundle != "-" {
		path := pprofPath(j.bundle)
		if err := writeOut(path, stdout, "pprof profile", func(w io.Writer) error { _, err := w.Write(p.PProf); return err }); err != nil {
			return err
		}
		if j.json != "-" {
			fmt.Fprintf(stdout, "On-CPU profile: %s (go tool pprof -http : %s)\n", path, path)
		}
	}
	return nil
}

// pprofPath is where a bundle's profile goes: beside it, its name less
// .gz and .json, plus .pprof.
func pprofPath(bundle string) string {
	p := strings.TrimSuffix(bundle, ".gz")
	p = strings.TrimSuffix(p, ".json")
	return p + ".pprof"
}

// failOn is the --fail-on flag: the least severe active finding that
// makes the command exit 1 (ExitFindings).
type failOn string

// Fail-on levels.
const (
	failCritical failOn = "critical" // the default: an active critical finding
	failWarning  failOn = "warning"  // an active warning or critical finding
	failNever    failOn = "never"    // findings never change the exit
)

func (f *failOn) String() string { return string(*f) }

func (f *failOn) Set(s string) error {
	switch v := failOn(s); v {
	case failCritical, failWarning, failNever:
		*f = v
		return nil
	}
	return fmt.Errorf("--fail-on %q: want critical, warning or never", s)
}

// registerFailOn defines --fail-on, critical by default.
func registerFailOn(fs *flag.FlagSet) *failOn {
	f := failCritical
	fs.Var(&f, "fail-on", "exit 1 for an active finding this severe or more: critical, warning, or never")
	return &f
}

// exitFor is a report's exit: errFindings for an active finding as
// severe as on says, or more.
func exitFor(fs []report.Finding, on failOn) error {
	for _, f := range fs {
		if f.Status != report.Active {
			continue
		}
		if f.Severity == report.Critical && on != failNever || f.Severity == report.Warning && on == failWarning {
			return errFindings
		}
	}
	return nil
}

func sidesText(serverNS, agent string) string {
	if agent != "" {
		return "the server (through its agent at " + agent + ") and this client"
	}
	if serverNS != "" {
		return "the server (netns " + serverNS + ") and this client"
	}
	return "this namespace (client, and server if local)"
}

// runErr marks the run errors that are the user's input: a bad URL, a
// name that does not resolve, a port nobody listens on.
func runErr(err error) error {
	if errors.Is(err, load.ErrInvalid) || errors.Is(err, load.ErrResolve) || errors.Is(err, load.ErrScript) || errors.Is(err, run.ErrNotListening) || errors.Is(err, source.ErrUnauthorized) {
		return usageError{err}
	}
	return err
}

func writeRunJSON(path string, stdout io.Writer, r *report.Run) error {
	return writeOut(path, stdout, "report", indentedJSON(r))
}

func writeRunHTML(path string, stdout io.Writer, r *report.Run, res *run.Result) error {
	return writeOut(path, stdout, "HTML report", func(w io.Writer) error { return res.HTML(w, r) })
}
