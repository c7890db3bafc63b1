package lab

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
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

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/safepath"
	"github.com/netdoctor/netdoctor/internal/tune"
)

// RunOptions are the choices of one lab run (`netdoctor lab run`).
type RunOptions struct {
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

// Run builds the scenario's lab, runs netdoctor against it (`netdoctor
// run` in the client's namespace, observing the server's) and writes
// the reports to o.Out; with o.Fixed, or o.Tune, it fixes the lab and
// runs again. Its output, and the runs', goes to stdout and stderr.
func Run(ctx context.Context, sc *Scenario, o RunOptions, stdout, stderr io.Writer) error {
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
	p := &printer{w: stdout}
	if o.Fixed {
		p.f("\n")
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
	p.f("\nReports:\n")
	for _, ph := range phases {
		pad := strings.Repeat(" ", len(ph.label()))
		p.f("  %s: %s\n  %s  %s\n  %s  %s (evidence: netdoctor diagnose reads it)\n", ph.label(), ph.html, pad, ph.json, pad, ph.bundle)
	}
	if o.Tune {
		p.f("  plan: %s\n  verify (before, after, verdicts): %s\n", before.plan, before.verify)
		if before.capacity != "" {
			html := before.capacityHTML()
			p.f("  capacity (before, after): %s, %s and %s\n", before.capacity, html, strings.TrimSuffix(html, ".html")+".after.html")
		}
	}
	return p.err
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
	sc          *Scenario
	stage, from int
	profileHz   int
	json, html  string
	bundle      string // the run's evidence (run --bundle)
	// plan and verify, when set: plan from the run's report and verify
	// the plan in the same lab.
	plan, verify string
	// agent: the server's side through an agent in its namespace.
	agent bool
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
	e, err := New(runID())
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
		var m ErrMissing
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
	if ph.profileHz > 0 {
		args = append(args, "--profile-hz", strconv.Itoa(ph.profileHz))
	}
	if ph.agent {
		url, tok, _, err := e.StartAgent(ctx)
		if err != nil {
			return err
		}
		p.f("Agent: %s in netns %s (log %s)\n\n", url, e.ServerNS, filepath.Join(e.Dir, "agent.out"))
		args = append(args, "--server-agent", url, "--token-file", tok)
	} else {
		args = append(args, "--server-netns", e.ServerNS.Name)
	}
	args = append(args, "--json", ph.json, "--html", ph.html, "--bundle", ph.bundle, t.URL)
	if err := Netdoctor(ctx, e.ClientNS, args, stdout, stderr); err != nil {
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

// StartAgent starts `netdoctor agent` in the lab's server namespace, on
// the server's address with a token of its own, and returns its URL and
// the token's file: the run reaches it over the veth, as it would reach
// an agent on another host. extra are more of the agent's flags.
func (e *Env) StartAgent(ctx context.Context, extra ...string) (url, tokenFile string, p *Proc, err error) {
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

// Netdoctor runs netdoctor with args in namespace ns, its output
// passed through. Exit 1 (active critical findings) is the point of
// most scenarios, not an error.
func Netdoctor(ctx context.Context, ns netns.NS, args []string, stdout, stderr io.Writer) error {
	exe, env := Self()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns.Name, exe}, args...)...)
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

// tune plans from the phase's report and verifies the plan in the lab:
// netdoctor's own fix, where --fixed applies the scenario's.
func (ph phase) tune(ctx context.Context, e *Env, t *Target, stdout, stderr io.Writer) error {
	p := &printer{w: stdout}
	p.f("\nPlanning from %s:\n\n", ph.json)
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
	p.f("\n")
	args := append(append([]string{"run"}, ph.sc.Load...), t.Args...)
	if ph.profileHz > 0 {
		args = append(args, "--profile-hz", strconv.Itoa(ph.profileHz))
	}
	args = append(args, "--baseline", "1s", "--tail", "1s", "--server-netns", e.ServerNS.Name,
		"--verify-with", ph.plan, "--json", ph.verify, t.URL)
	if err := Netdoctor(ctx, e.ClientNS, args, stdout, stderr); err != nil {
		return err
	}
	if ph.capacity != "" {
		// How much it takes within its SLO, before and after the same
		// plan: the capacity search with its diagnosis, twice.
		p.f("\nCapacity before → after the plan (within p99<=500ms, errors<=0.1%%; %v at most):\n\n", ph.capacityFor)
		args := append([]string{"capacity"}, t.Args...)
		args = append(args, "--server-netns", e.ServerNS.Name, "--verify-with", ph.plan, "--max-duration", ph.capacityFor.String(),
			"--json", ph.capacity, "--html", ph.capacityHTML(), t.URL)
		if err := Netdoctor(ctx, e.ClientNS, args, stdout, stderr); err != nil {
			return err
		}
	}
	return p.err
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

// printer writes until the first error, and keeps it.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
