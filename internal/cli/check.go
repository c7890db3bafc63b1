package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/netdoctor/netdoctor/internal/agent"
	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/collect"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/run"
	"github.com/netdoctor/netdoctor/internal/source"

	"github.com/netdoctor/netdoctor/internal/printable"
)

type sourceOpts struct {
	netns   string
	noDNS   bool
	dnsName string
}

func (o *sourceOpts) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&o.netns, "netns", "", "observe this network namespace (a name from 'ip netns list' or a path such as /proc/PID/ns/net)")
	fs.BoolVar(&o.noDNS, "no-dns", false, "do not send probe queries to the configured nameservers")
	fs.StringVar(&o.dnsName, "dns-name", "", "name to look up in the DNS probe (default: this host's name)")
}

// source resolves the namespace once and prepares its collectors.
func (o *sourceOpts) source(dnsEvery int) (*source.Local, error) {
	ns, err := netns.Resolve(o.netns)
	if err != nil {
		return nil, err
	}
	return source.NewLocal(collect.Config{NetNS: ns, DNS: !o.noDNS, DNSName: o.dnsName, DNSEvery: dnsEvery, DNSRepeat: 10, Drops: true})
}

func runCheck(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("check", stderr)
	var src sourceOpts
	src.register(fs)
	var window = new(time.Duration)
	durationVar(fs, window, "window", 5*time.Second, "time between the two snapshots; counters must rise within it to count as active")
	profileHz := fs.Int("profile-hz", cpuprof.DefaultHz, "on-CPU profile of the servers behind the listeners during the window, samples a second on each CPU; 0 for none")
	var out outputs
	out.register(fs, "also write the JSON report to this file (- for stdout, replacing the text report)")
	var ag agentFlags
	ag.register(fs, "agent", "the current diagnosis of the host `netdoctor agent` at this URL observes (http(s)://HOST:9120), from its recent window")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("check takes no arguments, got %q", pos)
	}
	if err := oneStdout("json", out.json, "html", out.html); err != nil {
		return err
	}
	if err := checkOutputs("json", out.json, "html", out.html); err != nil {
		return err
	}
	rc, err := ag.config()
	if err != nil {
		return err
	}
	if rc != nil {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		for _, f := range []string{"netns", "window", "no-dns", "dns-name", "profile-hz"} {
			if set[f] {
				return badInput("--%s is the agent's to choose (netdoctor agent --help): check --agent reads its diagnosis", f)
			}
		}
		return checkAgent(ctx, *rc, out, stdout, stderr)
	}
	if *window < 100*time.Millisecond || *window > time.Hour {
		return badInput("--window %v: must be between 100ms and 1h", *window)
	}
	if *profileHz < 0 || *profileHz > cpuprof.MaxHz {
		return badInput("--profile-hz %d: want 0 (no profile) to %d", *profileHz, cpuprof.MaxHz)
	}
	s, err := src.source(1000000) // probe DNS once, on the first snapshot
	if err != nil {
		return err
	}
	defer s.Close()
	var pr *progress
	c := s.Check(ctx, *window, agent.MaxPools, *profileHz, func() { pr = startPhase(stderr, "window: counters between two snapshots", *window) })
	pr.done()
	if c.Interrupted {
		fmt.Fprintln(stderr, "netdoctor: interrupted, reporting on the shorter window")
	}
	if c.TraceErr != nil {
		fmt.Fprintf(stderr, "netdoctor: dependencies not traced: %v\n", c.TraceErr)
	}
	found := rules.CheckHost(c.Bundle, c.Traced, c.Profile)
	r := report.New("check", c.Bundle, found)
	r.Dependencies = c.Traced
	if p := c.Profile; p != nil {
		r.Profile, r.ProfileError = profileSummary(p.Profile, p.Error)
	}
	return writeReport(r, out, stdout, stderr)
}

// profileSummary sums a profile up for a report, or says why there is
// none.
func profileSummary(p *cpuprof.Profile, why string) (*cpuprof.Summary, string) {
	if p == nil {
		return nil, why
	}
	sum, err := cpuprof.Summarize(p)
	if err != nil {
		return nil, "the profile could not be read: " + err.Error()
	}
	return sum, ""
}

// checkAgent prints the diagnosis an agent keeps of its recent window.
func checkAgent(ctx context.Context, rc source.RemoteConfig, out outputs, stdout, stderr io.Writer) error {
	r, err := source.NewRemote(ctx, rc)
	if err != nil {
		return agentErr(err)
	}
	defer r.Close()
	rep, err := r.Findings(ctx)
	if err != nil {
		return agentErr(err)
	}
	rep.Command = "check --agent " + r.URL()
	if rep.Status == "" { // an agent older than the status field
		rep.Status = report.OutcomeOf(rep.Verdict, rep.Findings)
	}
	return writeReport(rep, out, stdout, stderr)
}

// agentErr marks a refused token as the user's input to fix.
func agentErr(err error) error {
	if errors.Is(err, source.ErrUnauthorized) {
		return usageError{err}
	}
	return err
}

// outputs are a check's or a diagnosis's reports besides the text, and
// the findings that fail the command.
type outputs struct {
	json, html string
	failOn     *failOn
}

// toStdout names the report that goes to stdout ("-") instead of the
// text, or "".
func (o *outputs) toStdout() string {
	switch "-" {
	case o.json:
		return "json"
	case o.html:
		return "html"
	}
	return ""
}

func (o *outputs) register(fs *flag.FlagSet, jsonUsage string) {
	fs.StringVar(&o.json, "json", "", jsonUsage)
	fs.StringVar(&o.html, "html", "", "also write a self-contained HTML report to this file")
	o.failOn = registerFailOn(fs)
}

// writeReport writes one report, text and JSON.
func writeReport(r *report.Report, out outputs, stdout, stderr io.Writer) error {
	if out.toStdout() == "" {
		if err := report.Text(stdout, r); err != nil {
			return err
		}
	}
	if out.json != "" {
		if err := writeOut(out.json, stdout, "report", func(w io.Writer) error { return report.JSON(w, r) }); err != nil {
			return err
		}
	}
	if out.html != "" {
		if err := writeOut(out.html, stdout, "HTML report", func(w io.Writer) error { return report.CheckHTML(w, r) }); err != nil {
			return err
		}
	}
	if r.Partial {
		fmt.Fprintln(stderr, "netdoctor: partial evidence: some collectors failed (see \"collectors\" in the report)")
	}
	return exitFor(r.Findings, *out.failOn)
}

func runCollect(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("collect", stderr)
	var src sourceOpts
	src.register(fs)
	var window = new(time.Duration)
	durationVar(fs, window, "window", 10*time.Second, "how long to sample")
	var interval = new(time.Duration)
	durationVar(fs, interval, "interval", time.Second, "time between snapshots")
	out := fs.String("out", "", "bundle file to write, gzip'd if it ends in .gz (required; - for stdout)")
	// -o as before; --out as tune plan and lab run name their output.
	fs.StringVar(out, "o", "", "the same as --out")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return badInput("collect takes no arguments, got %q", pos)
	case *out == "":
		return badInput("collect needs --out FILE")
	case *interval < 10*time.Millisecond:
		return badInput("--interval %v: must be at least 10ms", *interval)
	case *window < 0 || *window > 24*time.Hour:
		return badInput("--window %v: must be between 0 and 24h", *window)
	}
	if err := checkOutput("out", *out); err != nil {
		return err
	}
	count := int(*window / *interval) + 1
	s, err := src.source(count) // probe DNS on the first snapshot only
	if err != nil {
		return err
	}
	defer s.Close()
	pr := startPhase(stderr, "collect: a snapshot every "+interval.String(), *window)
	b := source.Bundle(ctx, s, *interval, count)
	pr.done()
	if err := writeOut(*out, stdout, "bundle", gzipped(*out, func(w io.Writer) error { return json.NewEncoder(w).Encode(evidence.NamespaceFile(b)) })); err != nil {
		return err
	}
	if *out != "-" {
		fmt.Fprintf(stderr, "netdoctor: %d snapshots written to %s\n", len(b.Snapshots), *out)
	}
	return nil
}

func runDiagnose(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("diagnose", stderr)
	var out outputs
	out.register(fs, "also write the JSON report to this file (- for stdout)")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("diagnose needs exactly one bundle file")
	}
	if err := oneStdout("json", out.json, "html", out.html); err != nil {
		return err
	}
	if err := checkOutputs("json", out.json, "html", out.html); err != nil {
		return err
	}
	f, err := readBundle(pos[0])
	if err != nil {
		return err
	}
	if f.Kind == evidence.KindRun {
		return diagnoseRun(f.Run, out, stdout)
	}
	b := f.Bundle
	var tr *evidence.Traced
	if in := b.Incident; in != nil {
		tr = in.Dependencies
		if out.toStdout() == "" {
			incidentText(stdout, b)
			incidentProfile(stdout, in)
		}
	}
	found := rules.CheckHost(b, tr, nil)
	r := report.New("diagnose", b, found)
	r.Dependencies = tr
	return writeReport(r, out, stdout, stderr)
}

// incidentProfile prints the on-CPU profile an agent's incident
// carries, or why it has none.
func incidentProfile(w io.Writer, in *evidence.Incident) {
	if in.Profile == nil {
		if in.ProfileError != "" {
			report.ProfileText(w, nil, in.ProfileError)
		}
		return
	}
	sum, err := cpuprof.Summarize(in.Profile)
	if err != nil {
		report.ProfileText(w, nil, "the incident's profile could not be read: "+err.Error())
		return
	}
	report.ProfileText(w, sum, "")
}

// incidentText says why the agent wrote an incident bundle: what turned
// active when, and the window it kept around it.
func incidentText(w io.Writer, b *evidence.Bundle) {
	w = printable.NewWriter(w)
	v := printable.String
	in := b.Incident
	fmt.Fprintf(w, "Incident at %s (netdoctor agent):", in.Time.UTC().Format("2006-01-02 15:04:05 UTC"))
	for _, f := range in.Findings {
		subj := ""
		if f.Subject != "" {
			subj = " " + v(f.Subject)
		}
		fmt.Fprintf(w, "\n  %s%s turned active at %s: %s", v(string(f.ID)), subj, f.Time.UTC().Format(time.TimeOnly), v(f.Title))
	}
	if n := len(b.Snapshots); n > 0 {
		fmt.Fprintf(w, "\n  window kept: %s before to %s after",
			in.Time.Sub(b.Snapshots[0].Time).Round(time.Second), b.Snapshots[n-1].Time.Sub(in.Time).Round(time.Second))
	}
	if in.During != "" {
		fmt.Fprintf(w, "\n  meanwhile netdoctor runs were watching: %s (their load may be what this records)", v(in.During))
	}
	fmt.Fprintf(w, "\n\n")
}

// readBundle reads the bundle file at path, of either kind, gzip'd or
// not.
func readBundle(path string) (*evidence.File, error) {
	f, err := openData(path)
	if err != nil {
		return nil, badInput("read bundle %s: %v", path, dataError(err))
	}
	defer f.Close()
	return decodeBundle(f, path)
}

// decodeBundle decodes the bundle file at path from r
// (FuzzReadBundle) with the one reader of bundles, evidence.Decode. A
// file that is no bundle (a report, a plan, other JSON) or one of a
// newer netdoctor is one line that says what it is and what reads it.
func decodeBundle(r io.Reader, path string) (*evidence.File, error) {
	raw, err := io.ReadAll(capped.Reader(r, capped.Bundle, "bundle"))
	if err != nil {
		return nil, badInput("read bundle %s: %v", path, dataError(err))
	}
	f, err := evidence.Decode(raw)
	var fe *evidence.FileError
	switch {
	case err == nil:
		return f, nil
	case !errors.As(err, &fe):
		return nil, badInput("read bundle %s: %v", path, dataError(err))
	case fe.Newer():
		return nil, badInput("%s is a bundle of version %d, newer than this netdoctor reads (1 to %d): use the netdoctor that wrote it", path, fe.Version, evidence.BundleVersion)
	case fe.Kind != "" && fe.Version < 1:
		return nil, badInput("%s is JSON but not a bundle (it has no netdoctor version): %s", path, bundleHint)
	case fe.Kind != "" && fe.Kind != evidence.KindNamespace && fe.Kind != evidence.KindRun:
		return nil, badInput("%s is a bundle of kind %q, which this netdoctor does not read: use the netdoctor that wrote it", path, fe.Kind)
	}
	var d docKind
	json.Unmarshal(raw, &d) // it decoded as a FileError's top level: it is an object
	return nil, notA(path, d, "a bundle", bundleHint)
}

// diagnoseRun diagnoses a run's evidence again and writes what run
// wrote.
func diagnoseRun(ev *evidence.Run, out outputs, stdout io.Writer) error {
	res := run.Diagnose(ev)
	r := res.Report()
	if out.toStdout() == "" {
		if err := report.RunText(stdout, r, true); err != nil {
			return err
		}
	}
	if out.json != "" {
		if err := writeRunJSON(out.json, stdout, r); err != nil {
			return err
		}
	}
	if out.html != "" {
		if err := writeRunHTML(out.html, stdout, r, res); err != nil {
			return err
		}
	}
	return exitFor(r.Findings, *out.failOn)
}
