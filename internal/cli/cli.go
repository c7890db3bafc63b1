package cli

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/safepath"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/printable"
)

// Exit codes, documented in docs/report.md.
const (
	ExitOK       = 0 // ran; no active critical finding
	ExitFindings = 1 // ran; at least one active critical finding
	ExitUsage    = 2 // bad flags or input: unknown namespace, unreadable bundle
	ExitDenied   = 3 // not permitted: observing another namespace needs root
	ExitFailed   = 4 // could not produce a report at all
	ExitPartial  = 5 // ran; a side's evidence was lost midway (its agent stopped answering)
)

// Version is the VERSION file's (netdoctor.Version); a build may set
// another with -ldflags "-X ...cli.Version=v", which the linker sets
// only in a variable without an initializer (hence init).
var Version string

func init() {
	if Version == "" {
		Version = netdoctor.Version()
	}
}

type command struct {
	name, usage string
	run         func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() []command {
	return []command{
		{"check", "audit this host (or --netns NS) over a short window: active problems and latent risks", runCheck},
		{"collect", "sample every collector each second and save the snapshots as a bundle", runCollect},
		{"diagnose", "run the rules on a saved bundle", runDiagnose},
		{"load", "HTTP load generator with wrk's flags, open-loop -R, HDR latency, per-second timeline", runLoad},
		{"run", "load a service while sampling client and server every second, then diagnose the load window", runRun},
		{"capacity", "find the highest request rate a service answers within its SLO, and what limits it there", runCapacity},
		{"agent", "serve this host's evidence, and a diagnosis that runs all the time, over HTTP (for run --server-agent, check --agent, Prometheus)", runAgent},
		{"rules", "print Prometheus alerting rules for the agent's findings (--format prometheusrule for the operator)", runRules},
		{"lab", "seed cases rebuilt in network namespaces with real servers: list, run NAME [--fixed], clean", runLabCmd},
		{"tune", "turn a report into a reviewed change set: plan REPORT, apply PLAN (dry run unless --yes), rollback", runTuneCmd},
		{"completion", "print the shell completion script: bash, zsh or fish", runCompletion},
		{"manpages", "write the man pages to a directory", runManpages},
		{"merge", "merge the results of a load's workers (load --segment i/N --json) into one: percentiles of the merged histogram", runMerge},
		{"compare", "compare two reports (run, load, check or diagnose): load figures side by side, findings gone and new", runCompare},
		{"version", "print the version, the commit, the Go it was built with, and the kernel features found", runVersion},
	}
}

// Run executes one netdoctor command line and returns the exit code.
// What it writes to stderr (errors, notes, the agent's log) goes through
// the one sanitiser (internal/printable), as the text reports on stdout
// do: an error may name another user's file or process.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	stderr = printable.NewWriter(stderr)
	if len(args) == 0 {
		usage(stderr)
		return ExitUsage
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		// `netdoctor help run` is `netdoctor run --help`, and `netdoctor
		// help accept-queue-overflow` says what a report's finding means.
		if len(args) > 1 && args[0] == "help" {
			if c := rules.ClassOf(report.FindingID(args[1])); c.Meaning != "" {
				return exitCode(explainFinding(stdout, c), stderr)
			}
			if !slices.ContainsFunc(commands(), func(c command) bool { return c.name == args[1] }) {
				fmt.Fprintf(stderr, "netdoctor: help %s: no such command or finding ID (netdoctor --help lists the commands, docs/findings.md the finding IDs)\n", args[1])
				return ExitUsage
			}
			return Run(ctx, append(args[1:], "--help"), stdout, stderr)
		}
		usage(stdout)
		return ExitOK
	}
	if args[0] == "--version" || args[0] == "-v" {
		args = append([]string{"version"}, args[1:]...)
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return exitCode(c.run(ctx, args[1:], stdout, stderr), stderr)
		}
	}
	fmt.Fprintf(stderr, "netdoctor: unknown command %q (netdoctor --help lists them)\n", args[0])
	return ExitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "netdoctor: find why a Linux service is slow under load\n\nusage: netdoctor COMMAND [flags]\n\ncommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nflags:\n  --version   print the version (netdoctor version says more)\n  --help      this list; netdoctor COMMAND --help for a command's flags and examples,\n              netdoctor help FINDING-ID for what a report's finding means")
}

// explainFinding says what a finding ID means, from its class: what is
// wrong, when it is active and when latent, the seed case it comes from,
// and the commands that report it (docs/findings.md's row).
func explainFinding(w io.Writer, c rules.Class) error {
	unquote := func(s string) string { return strings.ReplaceAll(s, "`", "") }
	_, err := fmt.Fprintf(w, "%s: %s\n\n  active when: %s\n  latent when: %s\n  seed case:   %s\n  reported by: %s\n\nIts section in docs/findings.md (/usr/share/doc/netdoctor/findings.md) says what it reads and its thresholds.\n",
		c.ID, c.Meaning, unquote(c.Active), unquote(c.LatentWhen), c.Seed, unquote(c.ReportedBy))
	return err
}

// usageError marks bad input; findingsError marks a report with an active
// critical finding (not a failure, but a non-zero exit for scripts).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// deniedError marks something only root may do.
type deniedError struct{ err error }

func (d deniedError) Error() string { return d.err.Error() }
func (d deniedError) Unwrap() error { return d.err }

var errFindings = errors.New("active critical findings")

// errLost marks a report whose evidence stopped midway.
var errLost = errors.New("partial report")

func badInput(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func exitCode(err error, stderr io.Writer) int {
	var u usageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		return ExitOK
	case errors.Is(err, errFindings):
		return ExitFindings
	case errors.Is(err, errLost):
		fmt.Fprintf(stderr, "netdoctor: %v\n", err)
		return ExitPartial
	case errors.Is(err, netns.ErrPermission), errors.As(err, new(deniedError)):
		fmt.Fprintf(stderr, "netdoctor: %v\n", err)
		return ExitDenied
	case errors.As(err, &u), errors.Is(err, netns.ErrNotFound):
		fmt.Fprintf(stderr, "netdoctor: %v\n", err)
		return ExitUsage
	}
	fmt.Fprintf(stderr, "netdoctor: %v\n", err)
	return ExitFailed
}

// newFlags returns a FlagSet that reports errors as one-line usage
// errors instead of exiting; the flag list is printed for -h only.
func newFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("netdoctor "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {} // the flag list is printed by parse, for -h only
	noteFlags(fs)
	return fs
}

// durationFlag is a time.Duration flag that takes Go's durations (10s,
// 500ms, 2m) or, as wrk's -d does, a bare number of seconds ("--window 5"
// is five seconds): every duration flag of netdoctor reads the same way.
// Its error says what is wrong: the flag package's own says only "parse
// error".
type durationFlag struct{ p *time.Duration }

func (d durationFlag) String() string {
	if d.p == nil {
		return ""
	}
	return d.p.String()
}

// maxBare bounds a bare number of seconds: more is a typo.
const maxBare = 366 * 24 * time.Hour

func (d durationFlag) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "eEnNxXiI") {
		if math.Abs(f) > maxBare.Seconds() {
			return fmt.Errorf("duration %q is more than a year of seconds", s)
		}
		*d.p = time.Duration(f * float64(time.Second))
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("not a duration %q: write e.g. 10s, 500ms, 2m, or a number of seconds", s)
	}
	*d.p = v
	return nil
}

// durationVar defines a duration flag with a clear error.
func durationVar(fs *flag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	fs.Var(durationFlag{p}, name, usage)
}

// wrkDurationFlag is the duration flag of wrk's -d and --timeout, which
// load and run share with wrk ("-d 10" is ten seconds, as everywhere):
// at most a day, and no "0s" in the help for no duration.
type wrkDurationFlag struct{ durationFlag }

// String is empty for no duration: -h then shows the default the usage
// names rather than "0s".
func (d wrkDurationFlag) String() string {
	if d.p == nil || *d.p == 0 {
		return ""
	}
	return d.p.String()
}

func (d wrkDurationFlag) Set(s string) error {
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "eEnNxX") {
		if math.Abs(f) > float64(24*time.Hour/time.Second) {
			return fmt.Errorf("duration %q is more than a day", s)
		}
		*d.p = time.Duration(f * float64(time.Second))
		return nil
	}
	return d.durationFlag.Set(s)
}

// wrkDurationVar defines a wrk-style duration flag under each name.
func wrkDurationVar(fs *flag.FlagSet, p *time.Duration, value time.Duration, usage string, names ...string) {
	*p = value
	for i, name := range names {
		u := usage
		if i > 0 {
			u = "same as " + flagName(names[0])
		}
		fs.Var(wrkDurationFlag{durationFlag{p}}, name, u)
	}
}

// flagName is a flag as a user writes it: -c, --timeout.
func flagName(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// wrkIntFlag is an integer flag that, as wrk's -c and -t, also takes an
// SI suffix: "1k" is 1000, "1M" a million.
type wrkIntFlag struct{ p *int }

func (n wrkIntFlag) String() string {
	if n.p == nil {
		return ""
	}
	return strconv.Itoa(*n.p)
}

func (n wrkIntFlag) Set(s string) error {
	num, mult := s, 1
	switch {
	case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
		num, mult = s[:len(s)-1], 1000
	case strings.HasSuffix(s, "M"):
		num, mult = s[:len(s)-1], 1000000
	case strings.HasSuffix(s, "G"):
		num, mult = s[:len(s)-1], 1000000000
	}
	v, err := strconv.Atoi(num)
	if err != nil || v > math.MaxInt32/mult || v < math.MinInt32/mult {
		return fmt.Errorf("not a count %q: write e.g. 100 or 1k", s)
	}
	*n.p = v * mult
	return nil
}

// wrkIntVar defines a wrk-style count flag under each name.
func wrkIntVar(fs *flag.FlagSet, p *int, value int, usage string, names ...string) {
	*p = value
	for i, name := range names {
		u := usage
		if i > 0 {
			u = "same as " + flagName(names[0])
		}
		fs.Var(wrkIntFlag{p}, name, u)
	}
}

// parse parses flags (printing the flag list to help on -h), allowing flags after positional arguments
// (`diagnose bundle.json --json out.json`), and wraps errors as usage
// errors.
func parse(fs *flag.FlagSet, args []string, help io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				writeHelp(help, fs)
				return nil, err
			}
			return nil, usageError{flagError(fs, err)}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
		if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
			pos = append(pos, args...)
			return pos, nil
		}
	}
}

// flagError says which flag was wrong and where the list is: the flag
// package's "flag provided but not defined: -x" names no command.
// The flag package names every flag with one dash ("-window"); it is
// echoed as the user writes it and the help shows it: --window, -c.
func flagError(fs *flag.FlagSet, err error) error {
	cmd := strings.TrimPrefix(fs.Name(), "netdoctor ")
	if name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: "); ok {
		return fmt.Errorf("%s: unknown flag %s (netdoctor %s --help lists them)", cmd, flagName(strings.TrimLeft(name, "-")), cmd)
	}
	msg := err.Error()
	for _, lead := range []string{"for flag -", "flag needs an argument: -", "bad flag syntax: -"} {
		if i := strings.Index(msg, lead); i >= 0 {
			rest := msg[i+len(lead):]
			name, tail, _ := strings.Cut(rest, ":")
			if tail != "" {
				tail = ":" + tail
			}
			msg = msg[:i] + lead[:len(lead)-1] + flagName(name) + tail
			break
		}
	}
	return fmt.Errorf("%s: %s", cmd, msg)
}

// writeOut writes through write to the file at path, or to stdout for
// "-", and reports a failed close too: a full disk shows up there. The
// file is created as safepath.Create does: netdoctor runs as root, and
// a path in /tmp may be a name another user took first.
func writeOut(path string, stdout io.Writer, what string, write func(io.Writer) error) error {
	if path == "-" {
		return write(stdout)
	}
	f, err := safepath.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	if err := write(f); err != nil {
		f.Abort()
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s %s: %w", what, path, err)
	}
	return nil
}

// checkOutput refuses, before anything is measured, an output that
// cannot be written: its directory missing, not a directory or not
// writable (a read-only file system too), or the path itself a
// directory. The file is created only at the end, when there is
// something to write (writeOut): a run that fails leaves no empty report
// behind, nor truncates the last one.
func checkOutput(flag, path string) error {
	if path == "" || path == "-" {
		return nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return badInput("%s %s: is a directory: name a file", flagName(flag), path)
	}
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return badInput("%s %s: directory %s does not exist", flagName(flag), path, dir)
	case err != nil:
		return badInput("%s %s: %v", flagName(flag), path, err)
	case !fi.IsDir():
		return badInput("%s %s: %s is not a directory", flagName(flag), path, dir)
	}
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return badInput("%s %s: directory %s is not writable (%v)", flagName(flag), path, dir, err)
	}
	return nil
}

// checkOutputs checks each flag's output (name, path pairs).
func checkOutputs(flags ...string) error {
	for i := 0; i+1 < len(flags); i += 2 {
		if err := checkOutput(flags[i], flags[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// textOut is where a command's progress and notes go: stderr when the
// JSON report goes to stdout (--json -), which then holds only JSON.
func textOut(jsonOut string, stdout, stderr io.Writer) io.Writer {
	if jsonOut == "-" {
		return stderr
	}
	return stdout
}

// oneStdout refuses two outputs to stdout ("-"): a script could not
// tell one from the other. flags pairs each flag's name with its value.
func oneStdout(flags ...string) error {
	var named []string
	for i := 0; i+1 < len(flags); i += 2 {
		if flags[i+1] == "-" {
			named = append(named, "--"+flags[i])
		}
	}
	if len(named) > 1 {
		return badInput("%s all write to stdout (-): name a file for all but one", strings.Join(named, " and "))
	}
	return nil
}

// indentedJSON returns a writer of v as indented JSON.
func indentedJSON(v any) func(io.Writer) error {
	return func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
}

// readWith opens a file the user named and decodes it; either failure
// is bad input (exit 2), naming the file.
func readWith[T any](path, what string, read func(io.Reader) (T, error)) (T, error) {
	var zero T
	f, err := openData(path)
	if err != nil {
		return zero, usageError{fmt.Errorf("read %s: %w", what, err)}
	}
	defer f.Close()
	v, err := read(f)
	if err != nil {
		return zero, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	return v, nil
}

// gzipped writes through write compressed when path ends in .gz: a run's
// bundle shrinks about twenty-fold, most of it counters that repeat.
func gzipped(path string, write func(io.Writer) error) func(io.Writer) error {
	if !strings.HasSuffix(path, ".gz") {
		return write
	}
	return func(w io.Writer) error {
		z := gzip.NewWriter(w)
		if err := write(z); err != nil {
			return err
		}
		return z.Close()
	}
}

// openData opens a file the user named, decompressing it when it is
// gzip'd (whatever its name), capped (capped.Decompressed): every
// reader of it, the sniff of what it is included, sees at most
// capped.Bundle bytes of it.
func openData(path string) (io.ReadCloser, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := capped.Decompressed(f, capped.Bundle, path)
	if err != nil {
		f.Close()
		return nil, err
	}
	return readCloser{r, f}, nil
}

// dataReader reads r, decompressed when it is gzip'd, capped.
func dataReader(r io.Reader) (io.Reader, error) {
	return capped.Decompressed(r, capped.Bundle, "the file")
}

type readCloser struct {
	io.Reader
	io.Closer
}
