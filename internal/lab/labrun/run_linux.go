package labrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/netdoctor/netdoctor/internal/agentapi"
	"github.com/netdoctor/netdoctor/internal/capacity"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/run"
	"github.com/netdoctor/netdoctor/internal/safepath"
	"github.com/netdoctor/netdoctor/internal/source"
	"github.com/netdoctor/netdoctor/internal/tune"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Options are the choices of one lab run (`netdoctor lab run`).
type Options struct {
	// Stage is the first stage whose faults are built (0: 1, all of
	// them; one past the last: none, the fixed lab).
	Stage int
	// Fixed then applies the scenario's fix (or the stage's), runs
	// again and compares; Tune lets netdoctor fix it instead: plan from
	// the run's report, apply the plan, run again, roll back.
	Fixed, Tune bool
	// Agent observes the server through `netdoctor agent` in its
	// namespace, reached over the veth, not by entering the namespace.
	Agent bool
	// Twin observes the server both ways in the first run, through its
	// namespace and through an agent in it (run.Options.ServerTwin):
	// the same load diagnosed twice, the agent's report in
	// before.agent.json beside before.json.
	Twin bool
	// Keep keeps the (last) lab running after the run until ctx ends.
	Keep bool
	// Out is the reports' directory (default: Reports(name)); HTML the
	// run's HTML report (default in Out; the fixed run's gets .fixed
	// before the extension).
	Out, HTML string
	// ProfileHz is the runs' on-CPU profile frequency (run
	// --profile-hz); 0 leaves run's default.
	ProfileHz int
	// Capacity bounds, with Tune, the capacity search before → after
	// the plan (capacity --verify-with); 0 skips it.
	Capacity time.Duration
}

// ExitFindings is netdoctor's exit code for a run with an active
// critical finding (cli.ExitFindings): the point of most scenarios, not
// an error.
const ExitFindings = 1

// Run builds the scenario's lab, runs netdoctor against it (a run from
// the client's namespace observing the server's: Measure) and writes
// the reports to o.Out; with o.Fixed, or o.Tune, it fixes the lab and
// runs again. Its output, and the runs', goes to stdout and stderr.
func Run(ctx context.Context, sc *lab.Scenario, o Options, stdout, stderr io.Writer) error {
	stage := o.Stage
	if stage == 0 {
		stage = 1
	}
	if o.Out == "" {
		dir, err := Reports(sc.Name, stderr)
		if err != nil {
			return fmt.Errorf("reports directory: %w", err)
		}
		o.Out = dir
	} else if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return fmt.Errorf("reports directory: %w", err)
	}
	if o.HTML == "" {
		o.HTML = filepath.Join(o.Out, sc.Name+".html")
	}
	before := phase{sc: sc, stage: stage, agent: o.Agent, profileHz: o.ProfileHz, json: filepath.Join(o.Out, "before.json"), bundle: filepath.Join(o.Out, "before.bundle.json"), html: o.HTML}
	if o.Twin {
		before.twinJSON = filepath.Join(o.Out, "before.agent.json")
	}
	if o.Tune {
		before.plan, before.verify = filepath.Join(o.Out, "plan.json"), filepath.Join(o.Out, "verify.json")
		if o.Capacity > 0 {
			before.capacity, before.capacityFor = filepath.Join(o.Out, "capacity.json"), o.Capacity
		}
	}
	phases := []phase{before}
	if o.Fixed {
		to := sc.Fixed()
		if o.Stage != 0 {
			to = stage + 1
		}
		ext := filepath.Ext(o.HTML)
		phases = append(phases, phase{sc: sc, stage: to, from: stage, agent: o.Agent, profileHz: o.ProfileHz, json: filepath.Join(o.Out, "after.json"), bundle: filepath.Join(o.Out, "after.bundle.json"),
			html: strings.TrimSuffix(o.HTML, ext) + ".fixed" + ext})
	}
	for i, ph := range phases {
		keep := o.Keep && i == len(phases)-1
		if err := ph.run(ctx, stdout, stderr, keep); err != nil {
			return err
		}
	}
	p := report.NewPrinter(stdout)
	if o.Fixed {
		p.F("\n")
		a, err := readReport(phases[0].json)
		if err != nil {
			return err
		}
		b, err := readReport(phases[1].json)
		if err != nil {
			return err
		}
		if err := report.CompareText(stdout, phases[0].json, a, phases[1].json, b); err != nil {
			return err
		}
	}
	p.F("\nReports:\n")
	for _, ph := range phases {
		pad := strings.Repeat(" ", len(ph.label()))
		p.F("  %s: %s\n  %s  %s\n  %s  %s (evidence: netdoctor diagnose reads it)\n", ph.label(), ph.html, pad, ph.json, pad, ph.bundle)
	}
	if before.twinJSON != "" {
		p.F("  the scenario's run through the agent: %s\n", before.twinJSON)
	}
	if o.Tune {
		p.F("  plan: %s\n  verify (before, after, verdicts): %s\n", before.plan, before.verify)
		if before.capacity != "" {
			html := before.capacityHTML()
			p.F("  capacity (before, after): %s, %s and %s\n", before.capacity, html, strings.TrimSuffix(html, ".html")+".after.html")
		}
	}
	return p.Err()
}

// Reports makes the default directory of a scenario's reports,
// netdoctor-reports/NAME in the temporary directory, private to the
// caller (safepath.PrivateDir): another user could otherwise create it
// first, or a symlink there, and choose where root writes and read what
// it wrote. When another user has taken it, a new private directory
// stands in, and stderr says so.
func Reports(name string, stderr io.Writer) (string, error) {
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

// phase is one lab built at one stage and one run against it.
type phase struct {
	sc          *lab.Scenario
	stage, from int
	profileHz   int
	json, html  string
	bundle      string // the run's evidence (run --bundle)
	// plan and verify, when set: plan from the run's report and verify
	// the plan in the same lab.
	plan, verify string
	// agent: the server's side through an agent in its namespace;
	// twinJSON, when set, the run's report from an agent beside the
	// namespace's (Options.Twin).
	agent    bool
	twinJSON string
	// capacity, when set with plan: the capacity before → after the
	// plan, searched within capacityFor.
	capacity    string
	capacityFor time.Duration
}

// capacityHTML is the capacity search's page, beside its JSON (the
// after search's is NAME.after.html, as capacity --verify-with writes).
func (ph phase) capacityHTML() string {
	return strings.TrimSuffix(ph.capacity, ".json") + ".html"
}

func (ph phase) label() string {
	if ph.from != 0 {
		return "fixed"
	}
	return "scenario"
}

func (ph phase) run(ctx context.Context, stdout, stderr io.Writer, keep bool) (err error) {
	p := report.NewPrinter(stdout)
	sc := ph.sc
	if ph.from == 0 {
		p.F("netdoctor lab %s — seed %s\n%s\n", sc.Name, sc.Seed, sc.Summary)
	} else {
		p.F("\nApplying the fix: %s\n", sc.Fixes(ph.from, ph.stage))
	}
	p.F("Faults: %s\n", sc.Faults(ph.stage))
	if want := sc.Expected(ph.stage); len(want) > 0 {
		p.F("Expected: %s\n", report.JoinIDs(want))
	}
	e, err := lab.New(lab.RunID())
	if err != nil {
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
	p.F("Lab: server %s in netns %s, client %s in netns %s; files in %s\n\n", e.ServerIP, e.ServerNS, e.ClientIP, e.ClientNS, e.Dir)
	if err := p.Err(); err != nil {
		return err
	}
	o := RunOptions(e, sc, t, ph.profileHz)
	if ph.agent || ph.twinJSON != "" {
		url, tokenFile, _, err := e.StartAgent(ctx)
		if err != nil {
			return err
		}
		p.F("Agent: %s in netns %s (log %s)\n\n", url, e.ServerNS, filepath.Join(e.Dir, "agent.out"))
		token, err := agentapi.ReadToken(tokenFile)
		if err != nil {
			return fmt.Errorf("agent token: %w", err)
		}
		if ph.agent {
			o.ServerNetNS, o.ServerAgent = netns.NS{}, &source.RemoteConfig{URL: url, Token: token}
		} else {
			o.ServerTwin = &source.RemoteConfig{URL: url, Token: token}
		}
	}
	j := Job{Run: &o, Reports: Outputs{JSON: ph.json, HTML: ph.html, Bundle: ph.bundle, TwinJSON: ph.twinJSON}}
	if err := Measure(ctx, e, j, stdout, stderr); err != nil {
		return err
	}
	if ph.plan != "" {
		if err := ph.tune(ctx, e, t, stdout, stderr); err != nil {
			return err
		}
	}
	if keep {
		p.F("\nThe lab is kept: e.g. `ip netns exec %s curl %s`; Ctrl-C removes it.\n", e.ClientNS, t.URL)
		<-ctx.Done()
	}
	return p.Err()
}

// RunOptions is the run the lab makes of scenario sc built in e (at
// t): the scenario's load at the target, both sides sampled through a
// second's baseline and tail, the server observed in its namespace,
// the servers' on-CPU profile at profileHz (0: run's default).
func RunOptions(e *lab.Env, sc *lab.Scenario, t *lab.Target, profileHz int) run.Options {
	o := run.Options{Load: sc.Load, ServerNetNS: e.ServerNS, Baseline: time.Second, Tail: time.Second, DNS: t.DNS, ProfileHz: profileHz}
	o.Load.URL = t.URL
	if o.ProfileHz == 0 {
		o.ProfileHz = cpuprof.DefaultHz
	}
	return o
}

// Measure has netdoctor make j from the lab's client namespace, its
// output passed through: a child (`netdoctor lab measure`, entered with
// `ip netns exec`) reads j as JSON on its stdin and runs it as `run`
// and `capacity` run once their flags are read, writing the same
// reports and exiting as they do. Exit 1 (active critical findings) is
// the point of most scenarios, not an error.
//
// A child, not run.Run called in this process, because a network
// namespace belongs to a thread and a run's client side is many: the
// load engine's event loops (each on a thread of its own), the
// goroutines that dial its TLS connections, the resolver that looks the
// target up, the probes and the client's sampling would each have to
// enter the namespace, and Go's resolver cannot be made to: it reads
// /etc/resolv.conf in the process's mount namespace, while the client's
// own (/etc/netns/NAME/resolv.conf, NS.ResolvConf) is put in its place
// only by `ip netns exec`, in a mount namespace of the child's. In the
// child every thread, socket and file is the client's, as for a user
// who runs netdoctor there, and Ctrl-C reaches the measurement as it
// reaches the command: it stops the load and still reports.
func Measure(ctx context.Context, e *lab.Env, j Job, stdout, stderr io.Writer) error {
	b, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("lab job: %w", err)
	}
	exe, env := lab.Self()
	cmd := exec.Command("ip", "netns", "exec", e.ClientNS.Name, exe, "lab", "measure")
	cmd.Env = append(os.Environ(), env...)
	// The child is netdoctor, which escapes its own output; its stderr is
	// the terminal itself, so that it shows its progress line.
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(b), stdout, printable.Raw(stderr)
	// Its own process group, so that Ctrl-C reaches it once, from us:
	// it then stops the load and still reports.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start netdoctor in the lab's client namespace: %w", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		// Interrupted: what the measurement said is beside the point,
		// it only has to end.
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
		return fmt.Errorf("netdoctor %s in the lab failed: %v", j.what(), err)
	}
	return nil
}

// what the job is, for an error.
func (j Job) what() string {
	w := "run"
	if j.Capacity != nil {
		w = "capacity"
	}
	if j.Verify != "" {
		w += " verifying " + j.Verify
	}
	return w
}

// tune plans from the phase's report and verifies the plan in the lab:
// netdoctor's own fix, where --fixed applies the scenario's.
func (ph phase) tune(ctx context.Context, e *lab.Env, t *lab.Target, stdout, stderr io.Writer) error {
	p := report.NewPrinter(stdout)
	p.F("\nPlanning from %s:\n\n", ph.json)
	plan, err := planFrom(ph.json)
	if err != nil {
		return err
	}
	if err := plan.Text(stdout); err != nil {
		return err
	}
	if err := writeJSON(ph.plan, "plan", plan); err != nil {
		return err
	}
	p.F("\n")
	if err := p.Err(); err != nil {
		return err
	}
	o := RunOptions(e, ph.sc, t, ph.profileHz)
	if err := Measure(ctx, e, Job{Run: &o, Verify: ph.plan, Reports: Outputs{JSON: ph.verify}}, stdout, stderr); err != nil {
		return err
	}
	if ph.capacity != "" {
		// How much it takes within its SLO, before and after the same
		// plan: the capacity search with its diagnosis, twice, with
		// capacity's default SLO and load.
		slo, err := capacity.ParseSLO(nil)
		if err != nil {
			return err
		}
		p.F("\nCapacity before → after the plan (within %s; %v at most):\n\n", slo.Text, ph.capacityFor)
		if err := p.Err(); err != nil {
			return err
		}
		c := capacity.Options{Load: load.Options{URL: t.URL}, Run: run.Options{ServerNetNS: e.ServerNS, DNS: t.DNS}, SLO: slo, MaxDuration: ph.capacityFor}
		j := Job{Capacity: &c, Verify: ph.plan, Reports: Outputs{JSON: ph.capacity, HTML: ph.capacityHTML()}}
		if err := Measure(ctx, e, j, stdout, stderr); err != nil {
			return err
		}
	}
	return p.Err()
}

// planFrom plans from a run's report against the live host, as `tune
// plan` does.
func planFrom(path string) (*tune.Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	defer f.Close()
	in, err := tune.ReadInput(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tune.Build(in, path, tune.Live{})
}

// readReport reads a run's report, as compare does.
func readReport(path string) (*report.Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	defer f.Close()
	r, err := report.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// writeJSON writes v to path as indented JSON, 0600 (safepath).
func writeJSON(path, what string, v any) error {
	f, err := safepath.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	enc := json.NewEncoder(f)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		f.Abort()
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	return nil
}
