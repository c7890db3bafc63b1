package cli

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/safepath"
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
	p := &printer{w: stdout}
	if *verbose {
		p.f("Each scenario's figures in the lab beside the article's: docs/lab.md\n\n")
	}
	for _, s := range lab.Scenarios {
		if !*verbose {
			p.f("%-22s seed %-28s %s\n", s.Name, s.Seed, s.Summary)
			continue
		}
		p.f("%s — seed %s\n  %s\n", s.Name, s.Seed, s.Summary)
		for i, st := range s.Stages {
			p.f("  stage %d: %s\n           fix: %s\n           reports: %s\n", i+1, st.Fault, st.Fix, report.JoinIDs(st.Reports))
		}
		if len(s.Reports) > 0 {
			p.f("  default (every fault at once) reports: %s\n", report.JoinIDs(s.Reports))
		} else {
			p.f("  reports: no critical finding\n")
		}
		p.f("  load: netdoctor run %s\n", strings.Join(s.Load, " "))
		p.f("  article: %s\n", s.Article)
		if s.Note != "" {
			p.f("  note: %s\n", s.Note)
		}
		p.f("\n")
	}
	return p.err
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

// labOptions are lab run's flags.
type labOptions struct {
	fixed bool
	tune  bool
	stage int
	keep  bool
	html  string
	out   string
	agent bool
	// capacity bounds, with tune, the capacity search before → after
	// the plan; 0 skips it.
	capacity time.Duration
}

func labRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("lab run", stderr)
	var o labOptions
	fs.BoolVar(&o.fixed, "fixed", false, "then apply the scenario's fix (or the stage's), run again and compare")
	fs.IntVar(&o.stage, "stage", 0, "start at this stage: the faults of it and later stages (default 1: all; one past the last: none, the fixed lab)")
	fs.BoolVar(&o.tune, "tune", false, "then let netdoctor fix it: plan from the run's report, apply the plan, run again, roll back (tune plan + run --verify-with)")
	durationVar(fs, &o.capacity, "capacity", 90*time.Second, "with --tune: then search the capacity before → after netdoctor's plan (capacity --verify-with) within this time; 0 skips it")
	fs.BoolVar(&o.agent, "agent", false, "observe the server through `netdoctor agent` started in its namespace and reached over the veth (run --server-agent), not by entering the namespace")
	fs.BoolVar(&o.keep, "keep", false, "keep the (last) lab running after the run, until Ctrl-C, to explore it")
	fs.StringVar(&o.html, "html", "", "HTML report of the run (the fixed run's gets .fixed before the extension); default in --out")
	fs.StringVar(&o.out, "out", "", "directory for the reports (default "+filepath.Join(os.TempDir(), "netdoctor-reports", "NAME")+")")
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
	stage := o.stage
	if stage == 0 {
		stage = 1
	}
	if len(sc.Stages) == 0 && o.fixed {
		return badInput("lab run %s: nothing to fix (it is the healthy control)", sc.Name)
	}
	if len(sc.Stages) > 0 && (stage < 1 || stage > sc.Fixed()) || len(sc.Stages) == 0 && stage != 1 {
		return badInput("lab run %s --stage %d: it has stages 1 to %d, and %d for all fixed", sc.Name, o.stage, len(sc.Stages), sc.Fixed())
	}
	if o.tune && o.fixed {
		return badInput("lab run: --tune (netdoctor's own fix) and --fixed (the scenario's) are two different runs: pick one")
	}
	if o.tune && o.agent {
		return badInput("lab run: --tune changes the server's host, which an agent only observes: drop --agent")
	}
	if o.tune && len(sc.Stages) == 0 {
		return badInput("lab run %s: nothing to tune (it is the healthy control)", sc.Name)
	}
	if o.fixed && stage == sc.Fixed() {
		return badInput("lab run %s --stage %d is the fixed lab already: drop --fixed", sc.Name, stage)
	}
	if os.Geteuid() != 0 {
		return deniedError{lab.ErrNeedsRoot}
	}
	if o.out == "" {
		dir, err := labReports(sc.Name, stderr)
		if err != nil {
			return fmt.Errorf("reports directory: %w", err)
		}
		o.out = dir
	} else if err := os.MkdirAll(o.out, 0o755); err != nil {
		return fmt.Errorf("reports directory: %w", err)
	}
	if o.html == "" {
		o.html = filepath.Join(o.out, sc.Name+".html")
	}
	before := labPhase{sc: sc, stage: stage, agent: o.agent, json: filepath.Join(o.out, "before.json"), bundle: filepath.Join(o.out, "before.bundle.json"), html: o.html}
	if o.capacity < 0 || o.capacity > 0 && o.capacity < 30*time.Second {
		return badInput("lab run --capacity %v: 0 to skip it, or at least 30s (two searches and the plan's apply)", o.capacity)
	}
	if o.tune {
		before.plan, before.verify = filepath.Join(o.out, "plan.json"), filepath.Join(o.out, "verify.json")
		if o.capacity > 0 {
			before.capacity, before.capacityFor = filepath.Join(o.out, "capacity.json"), o.capacity
		}
	}
	phases := []labPhase{before}
	if o.fixed {
		to := sc.Fixed()
		if o.stage != 0 {
			to = stage + 1
		}
		ext := filepath.Ext(o.html)
		phases = append(phases, labPhase{sc: sc, stage: to, from: stage, agent: o.agent, json: filepath.Join(o.out, "after.json"), bundle: filepath.Join(o.out, "after.bundle.json"),
			html: strings.TrimSuffix(o.html, ext) + ".fixed" + ext})
	}
	for i, ph := range phases {
		keep := o.keep && i == len(phases)-1
		if err := ph.run(ctx, stdout, stderr, keep); err != nil {
			return err
		}
	}
	p := &printer{w: stdout}
	if o.fixed {
		p.f("\n")
		a, err := readCompared(phases[0].json)
		if err != nil {
			return err
		}
		b, err := readCompared(phases[1].json)
		if err != nil {
			return err
		}
		if err := report.CompareText(stdout, phases[0].json, a, phases[1].json, b); err != nil {
			return err
		}
	}
	p.f("\nReports:\n")
	for _, ph := range phases {
		pad := strings.Repeat(" ", len(ph.label()))
		p.f("  %s: %s\n  %s  %s\n  %s  %s (evidence: netdoctor diagnose reads it)\n", ph.label(), ph.html, pad, ph.json, pad, ph.bundle)
	}
	if o.tune {
		p.f("  plan: %s\n  verify (before, after, verdicts): %s\n", before.plan, before.verify)
		if before.capacity != "" {
			p.f("  capacity (before, after): %s, %s and %s\n", before.capacity, before.capacityHTML(), afterPath(before.capacityHTML()))
		}
	}
	return p.err
}

// labReports makes the default directory of a scenario's reports,
// netdoctor-reports/NAME in the temporary directory, private to the
// caller (safepath.PrivateDir): another user could otherwise create it
// first, or a symlink there, and choose where root writes and read what
// it wrote. When another user has taken it, a new private directory
// stands in, and stderr says so.
func labReports(name string, stderr io.Writer) (string, error) {
	base := filepath.Join(os.TempDir(), "netdoctor-reports")
	if err := safepath.PrivateDir(base); errors.Is(err, safepath.ErrNotPrivate) {
		alt, terr := os.MkdirTemp("", "netdoctor-reports-")
		if terr != nil {
			return "", terr
		}
		fmt.Fprintf(stderr, "netdoctor: %v: reports in %s instead\n", err, alt)
		base = alt
	} else if err != nil {
		return "", err
	}
	dir := filepath.Join(base, name)
	return dir, safepath.PrivateDir(dir)
}

// labPhase is one lab built at one stage and one run against it.
type labPhase struct {
	sc          *lab.Scenario
	stage, from int
	json, html  string
	bundle      string // the run's evidence (run --bundle)
	// plan and verify, when set: plan from the run's report and verify
	// the plan in the same lab; capacity, when set, the capacity before
	// → after the plan, searched within capacityFor.
	plan, verify string
	capacity     string
	capacityFor  time.Duration
	// agent: the server's side through an agent in its namespace.
	agent bool
}

func (ph labPhase) label() string {
	if ph.from != 0 {
		return "fixed"
	}
	return "scenario"
}

func (ph labPhase) run(ctx context.Context, stdout, stderr io.Writer, keep bool) (err error) {
	p := &printer{w: stdout}
	sc := ph.sc
	if ph.from == 0 {
		p.f("netdoctor lab %s — seed %s\n%s\n", sc.Name, sc.Seed, sc.Summary)
	} else {
		p.f("\nApplying the fix: %s\n", sc.Fixes(ph.from, ph.stage))
	}
	p.f("Faults: %s\n", sc.Faults(ph.stage))
	if want := sc.Expected(ph.stage); len(want) > 0 {
		p.f("Expected: %s\n", report.JoinIDs(want))
	}
	e, err := lab.New("L" + strconv.Itoa(os.Getpid()%100000))
	if err != nil {
		if errors.Is(err, lab.ErrNeedsRoot) {
			return deniedError{err}
		}
		return err
	}
	defer func() {
		if cerr := e.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("lab cleanup: %w (run `netdoctor lab clean`)", cerr)
		}
	}()
	t, err := sc.Build(ctx, e, ph.stage)
	if err != nil {
		var m lab.ErrMissing
		if errors.As(err, &m) {
			return fmt.Errorf("lab %s: %w", sc.Name, err)
		}
		return fmt.Errorf("lab %s: build: %w", sc.Name, err)
	}
	p.f("Lab: server %s in netns %s, client %s in netns %s; files in %s\n\n", e.ServerIP, e.ServerNS, e.ClientIP, e.ClientNS, e.Dir)
	if p.err != nil {
		return p.err
	}
	args := append(append([]string{"run"}, sc.Load...), t.Args...)
	args = append(args, "--baseline", "1s", "--tail", "1s")
	if ph.agent {
		url, tok, _, err := labAgent(ctx, e)
		if err != nil {
			return err
		}
		p.f("Agent: %s in netns %s (log %s)\n\n", url, e.ServerNS, filepath.Join(e.Dir, "agent.out"))
		args = append(args, "--server-agent", url, "--token-file", tok)
	} else {
		args = append(args, "--server-netns", e.ServerNS)
	}
	args = append(args, "--json", ph.json, "--html", ph.html, "--bundle", ph.bundle, t.URL)
	if err := labNetdoctor(ctx, e.ClientNS, args, stdout, stderr); err != nil {
		return err
	}
	if ph.plan != "" {
		if err := ph.tune(ctx, e, t, stdout, stderr); err != nil {
			return err
		}
	}
	if keep {
		p.f("\nThe lab is kept: e.g. `ip netns exec %s curl %s`; Ctrl-C removes it.\n", e.ClientNS, t.URL)
		<-ctx.Done()
	}
	return p.err
}

// labAgent starts `netdoctor agent` in the lab's server namespace, on
// the server's address with a token of its own, and returns its URL and
// the token's file: the run reaches it over the veth, as it would reach
// an agent on another host.
func labAgent(ctx context.Context, e *lab.Env, extra ...string) (url, tokenFile string, p *lab.Proc, err error) {
	var b [24]byte
	rand.Read(b[:])
	tokenFile = filepath.Join(e.Dir, "agent.token")
	if err := os.WriteFile(tokenFile, []byte(base64.StdEncoding.EncodeToString(b[:])+"\n"), 0o600); err != nil {
		return "", "", nil, fmt.Errorf("agent token: %w", err)
	}
	addr := net.JoinHostPort(e.ServerIP, "9120")
	// Resolvers are probed when the run asks, as with --server-netns.
	args := append([]string{"agent", "--listen", addr, "--token-file", tokenFile, "--dns-every", "0"}, extra...)
	if p, err = e.StartSelf(ctx, e.ServerNS, "agent", "agent serving", args...); err != nil {
		return "", "", nil, fmt.Errorf("start the agent: %w", err)
	}
	return "http://" + addr, tokenFile, p, nil
}

// labNetdoctor runs netdoctor with args in namespace ns, its output
// passed through. Exit 1 (active critical findings) is the point of
// most scenarios, not an error.
func labNetdoctor(ctx context.Context, ns string, args []string, stdout, stderr io.Writer) error {
	exe, env := lab.Self()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, exe}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, so that Ctrl-C reaches it once, from us:
	// it then stops the load and still reports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start netdoctor run: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		// Interrupted: what the run said is beside the point, it only
		// has to end.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		return fmt.Errorf("lab run interrupted: %w", ctx.Err())
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == ExitFindings {
		return nil
	}
	if err != nil {
		return fmt.Errorf("netdoctor run in the lab failed: %v", err)
	}
	return nil
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

// tune plans from the phase's report and verifies the plan in the lab:
// netdoctor's own fix, where --fixed applies the scenario's.
func (ph labPhase) tune(ctx context.Context, e *lab.Env, t *lab.Target, stdout, stderr io.Writer) error {
	p := &printer{w: stdout}
	p.f("\nPlanning from %s:\n\n", ph.json)
	plan, err := planFrom(ph.json)
	if err != nil {
		return err
	}
	if err := plan.Text(stdout); err != nil {
		return err
	}
	if err := writeOut(ph.plan, stdout, "plan", indentedJSON(plan)); err != nil {
		return err
	}
	p.f("\n")
	args := append(append([]string{"run"}, ph.sc.Load...), t.Args...)
	args = append(args, "--baseline", "1s", "--tail", "1s", "--server-netns", e.ServerNS,
		"--verify-with", ph.plan, "--json", ph.verify, t.URL)
	if err := labNetdoctor(ctx, e.ClientNS, args, stdout, stderr); err != nil {
		return err
	}
	if ph.capacity != "" {
		// How much it takes within its SLO, before and after the same
		// plan: the capacity search with its diagnosis, twice.
		p.f("\nCapacity before → after the plan (within p99<=500ms, errors<=0.1%%; %v at most):\n\n", ph.capacityFor)
		args := append([]string{"capacity"}, t.Args...)
		args = append(args, "--server-netns", e.ServerNS, "--verify-with", ph.plan, "--max-duration", ph.capacityFor.String(),
			"--json", ph.capacity, "--html", ph.capacityHTML(), t.URL)
		if err := labNetdoctor(ctx, e.ClientNS, args, stdout, stderr); err != nil {
			return err
		}
	}
	return p.err
}

// capacityHTML is the capacity search's page, beside its JSON.
func (ph labPhase) capacityHTML() string {
	return strings.TrimSuffix(ph.capacity, ".json") + ".html"
}
