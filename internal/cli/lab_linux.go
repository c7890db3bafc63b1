package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/lab/labrun"
	"github.com/netdoctor/netdoctor/internal/report"
)

func runLabCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badInput("lab needs a subcommand: list, run NAME, clean")
	}
	switch args[0] {
	case "list":
		return labList(args[1:], stdout, stderr)
	case "run":
		return labRun(ctx, args[1:], stdout, stderr)
	case "clean":
		return labClean(args[1:], stdout, stderr)
	case "serve":
		return labServe(ctx, args[1:], stdout, stderr)
	case "measure":
		return labMeasure(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		return subcommandHelp(stdout, "lab")
	}
	return badInput("lab: unknown subcommand %q (list, run, clean)", args[0])
}

func labList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("lab list", stderr)
	verbose := fs.Bool("v", false, "describe each scenario: seed, faults, findings, fixes, the article's figures and the lab's")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("lab list takes no arguments")
	}
	p := report.NewPrinter(stdout)
	if *verbose {
		p.F("Each scenario's figures in the lab beside the article's: docs/lab.md\n\n")
	}
	for _, s := range lab.Scenarios {
		if !*verbose {
			p.F("%-22s seed %-28s %s\n", s.Name, s.Seed, s.Summary)
			continue
		}
		p.F("%s — seed %s\n  %s\n", s.Name, s.Seed, s.Summary)
		for i, st := range s.Stages {
			p.F("  stage %d: %s\n           fix: %s\n           reports: %s\n", i+1, st.Fault, st.Fix, report.JoinIDs(st.Reports))
		}
		if len(s.Reports) > 0 {
			p.F("  default (every fault at once) reports: %s\n", report.JoinIDs(s.Reports))
		} else {
			p.F("  reports: no critical finding\n")
		}
		p.F("  load: netdoctor run %s\n", strings.Join(loadArgs(s.Load), " "))
		p.F("  article: %s\n", s.Article)
		if s.Note != "" {
			p.F("  note: %s\n", s.Note)
		}
		p.F("\n")
	}
	return p.Err()
}

func labClean(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("lab clean", stderr)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("lab clean takes no arguments")
	}
	done, err := lab.Clean()
	if errors.Is(err, lab.ErrNeedsRoot) {
		return deniedError{err}
	}
	for _, d := range done {
		fmt.Fprintln(stdout, d)
	}
	if len(done) == 0 && err == nil {
		fmt.Fprintln(stdout, "nothing to clean")
	}
	return err
}

func labRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("lab run", stderr)
	var o labrun.Options
	fs.BoolVar(&o.Fixed, "fixed", false, "then apply the scenario's fix (or the stage's), run again and compare")
	fs.IntVar(&o.Stage, "stage", 0, "start at this stage: the faults of it and later stages (default 1: all; one past the last: none, the fixed lab)")
	fs.BoolVar(&o.Tune, "tune", false, "then let netdoctor fix it: plan from the run's report, apply the plan, run again, roll back (tune plan + run --verify-with)")
	durationVar(fs, &o.Capacity, "capacity", 90*time.Second, "with --tune: then search the capacity before → after netdoctor's plan (capacity --verify-with) within this time; 0 skips it")
	fs.BoolVar(&o.Agent, "agent", false, "observe the server through `netdoctor agent` started in its namespace and reached over the veth (run --server-agent), not by entering the namespace")
	fs.BoolVar(&o.Twin, "agent-twin", false, "observe the server both ways in the first run, in its namespace and through `netdoctor agent` started in it: the same load diagnosed twice, the agent's report in before.agent.json")
	fs.BoolVar(&o.Keep, "keep", false, "keep the (last) lab running after the run, until Ctrl-C, to explore it")
	fs.StringVar(&o.HTML, "html", "", "HTML report of the run (the fixed run's gets .fixed before the extension); default in --out")
	fs.IntVar(&o.ProfileHz, "profile-hz", 0, "the runs' on-CPU profile of the servers, samples a second on each CPU (run --profile-hz; default run's)")
	fs.StringVar(&o.Out, "out", "", "directory for the reports (default "+filepath.Join(os.TempDir(), "netdoctor-reports", "NAME")+")")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("lab run needs one scenario name: %s", strings.Join(lab.Names(), ", "))
	}
	sc, ok := lab.Lookup(pos[0])
	if !ok {
		return badInput("lab run: no scenario %q (netdoctor lab list): %s", pos[0], strings.Join(lab.Names(), ", "))
	}
	if o.ProfileHz < 0 || o.ProfileHz > cpuprof.MaxHz {
		return badInput("lab run --profile-hz %d: want 1 to %d (0: run's default)", o.ProfileHz, cpuprof.MaxHz)
	}
	if o.Capacity < 0 || o.Capacity > 0 && o.Capacity < 30*time.Second {
		return badInput("lab run --capacity %v: 0 to skip it, or at least 30s (two searches and the plan's apply)", o.Capacity)
	}
	stage := o.Stage
	if stage == 0 {
		stage = 1
	}
	if len(sc.Stages) == 0 && o.Fixed {
		return badInput("lab run %s: nothing to fix (it is the healthy control)", sc.Name)
	}
	if len(sc.Stages) > 0 && (stage < 1 || stage > sc.Fixed()) || len(sc.Stages) == 0 && stage != 1 {
		return badInput("lab run %s --stage %d: it has stages 1 to %d, and %d for all fixed", sc.Name, o.Stage, len(sc.Stages), sc.Fixed())
	}
	if o.Tune && o.Fixed {
		return badInput("lab run: --tune (netdoctor's own fix) and --fixed (the scenario's) are two different runs: pick one")
	}
	if o.Twin && (o.Agent || o.Tune) {
		return badInput("lab run: --agent-twin observes the server through its namespace and an agent at once: drop --agent and --tune")
	}
	if o.Tune && o.Agent {
		return badInput("lab run: --tune changes the server's host, which an agent only observes: drop --agent")
	}
	if o.Tune && len(sc.Stages) == 0 {
		return badInput("lab run %s: nothing to tune (it is the healthy control)", sc.Name)
	}
	if o.Fixed && stage == sc.Fixed() {
		return badInput("lab run %s --stage %d is the fixed lab already: drop --fixed", sc.Name, stage)
	}
	if os.Geteuid() != 0 {
		return deniedError{lab.ErrNeedsRoot}
	}
	err = labrun.Run(ctx, sc, o, stdout, stderr)
	if errors.Is(err, lab.ErrNeedsRoot) {
		return deniedError{err}
	}
	return err
}

// labMeasure is the lab's child in its client namespace (labrun.Measure;
// not for direct use): it reads the typed job on stdin and runs it as
// run and capacity run theirs once their flags are read, through the
// same code (doRun, doCapacity): the same reports, text and exit.
func labMeasure(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		return badInput("lab measure takes no arguments: it reads its job (JSON) on stdin")
	}
	j, err := labrun.ReadJob(os.Stdin)
	if err != nil {
		return usageError{err}
	}
	if j.Capacity != nil {
		return doCapacity(ctx, capacityJob{o: *j.Capacity, json: j.Reports.JSON, html: j.Reports.HTML, verify: j.Verify}, stdout, stderr)
	}
	o := *j.Run
	return doRun(ctx, runJob{o: o, json: j.Reports.JSON, html: j.Reports.HTML, bundle: j.Reports.Bundle, twinJSON: j.Reports.TwinJSON, verify: j.Verify, fail: failCritical,
		timed: o.Load.Duration > 0 || o.Load.Requests == 0}, stdout, stderr)
}

// labServe runs one of the lab's built-in servers (started by the lab in
// its namespaces; not for direct use).
func labServe(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return badInput("lab serve needs a server: mock, dns-relay, proxy, stall")
	}
	fs := newFlags("lab serve "+args[0], stderr)
	switch args[0] {
	case "mock":
		var m lab.Mock
		fs.StringVar(&m.Addr, "addr", "", "ip:port")
		fs.IntVar(&m.Backlog, "backlog", 50, "listen(2) backlog")
		fs.IntVar(&m.Workers, "workers", 100, "worker threads")
		durationVar(fs, &m.Sleep, "sleep", 35*time.Millisecond, "time spent per request")
		fs.StringVar(&m.LogFile, "log", "", "append a line per request to this file under an exclusive flock")
		durationVar(fs, &m.LogHold, "hold", 2*time.Millisecond, "how long each log write holds the lock")
		if _, err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		if m.Addr == "" {
			return badInput("lab serve mock needs --addr")
		}
		return lab.ServeMock(ctx, m, stdout)
	case "dns-relay":
		var r lab.Relay
		fs.StringVar(&r.Listen, "listen", "127.0.0.2:53", "ip:port to answer on (UDP)")
		fs.StringVar(&r.Upstream, "upstream", "127.0.0.1:53", "resolver to forward to")
		durationVar(fs, &r.Delay, "delay", 0, "hold each query this long")
		fs.BoolVar(&r.DropPTR, "drop-ptr", false, "never answer reverse (PTR) queries")
		if _, err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		return lab.ServeRelay(ctx, r, stdout)
	case "proxy":
		var p lab.Proxy
		fs.StringVar(&p.Listen, "listen", "", "ip:port to serve HTTP on")
		fs.StringVar(&p.Backend, "backend", "", "ip:port of the HTTP backend")
		fs.BoolVar(&p.Keepalive, "keepalive", false, "keep backend connections in a pool (default: one per request, closed by the proxy)")
		if _, err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		if p.Listen == "" || p.Backend == "" {
			return badInput("lab serve proxy needs --listen and --backend")
		}
		return lab.ServeProxy(ctx, p, stdout, stderr)
	case "stall":
		var s lab.Stall
		fs.StringVar(&s.Addr, "addr", "", "ip:port")
		fs.IntVar(&s.Every, "every", 10, "hold every Nth request (0: none)")
		durationVar(fs, &s.Hold, "hold", 5*time.Second, "how long a held request waits")
		if _, err := parse(fs, args[1:], stdout); err != nil {
			return err
		}
		if s.Addr == "" || s.Every < 0 {
			return badInput("lab serve stall needs --addr, and --every 0 or more")
		}
		return lab.ServeStall(ctx, s, stdout)
	}
	return badInput("lab serve: unknown server %q (mock, dns-relay, proxy, stall)", args[0])
}
