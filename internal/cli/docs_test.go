package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCommandDocs: every command has its help, man page and completion
// from one description, and the flags they list are the parser's own:
// a flag added to a command shows up in all three without more work.
func TestCommandDocs(t *testing.T) {
	for _, c := range commands() {
		found := false
		for _, d := range commandDocs {
			found = found || strings.HasPrefix(d.Path+" ", c.name+" ")
		}
		if !found {
			t.Errorf("command %s has no commandDoc", c.name)
		}
	}
	src, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`newFlags\("([a-z ]+)"`)
	for _, f := range src {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, _ := os.ReadFile(f)
		for _, m := range re.FindAllSubmatch(b, -1) {
			path := string(m[1])
			if _, ok := docOf(path); !ok && path != "lab serve " {
				t.Errorf("%s: newFlags(%q) has no commandDoc", f, path)
			}
		}
	}
	// The parser's flags, as help prints them.
	run := flagsOf("run")
	if len(run) < 20 {
		t.Fatalf("flagsOf(run) = %d flags", len(run))
	}
	var out bytes.Buffer
	if code := Run(context.Background(), []string{"run", "--help"}, &out, &out); code != ExitOK {
		t.Fatalf("run --help: exit %d", code)
	}
	for _, f := range run {
		if !strings.Contains(out.String(), "\n  "+flagName(f.Name)) {
			t.Errorf("run --help lacks %s:\n%s", flagName(f.Name), out.String())
		}
	}
	for _, want := range []string{"usage: netdoctor run [flags] URL", "examples:\n  netdoctor run "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run --help lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCompletion: each shell's script is valid for the shell (bash is
// run: completing `netdoctor run --server-n` offers --server-netns, and
// `netdoctor lab run h` the healthy scenario).
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		var out bytes.Buffer
		if code := Run(context.Background(), []string{"completion", sh}, &out, &out); code != ExitOK {
			t.Fatalf("completion %s: exit %d: %s", sh, code, out.String())
		}
		if !strings.Contains(out.String(), "--server-netns") && !strings.Contains(out.String(), "-l server-netns") {
			t.Errorf("completion %s lacks run's --server-netns", sh)
		}
		// Values: the namespaces' names, finding IDs for help.
		for _, want := range []string{netnsList, "accept-queue-overflow", "critical warning never"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("completion %s does not offer %q", sh, want)
			}
		}
		bin, err := exec.LookPath(sh)
		if err != nil {
			t.Logf("%s not installed: its script is not run", sh)
			continue
		}
		script := filepath.Join(t.TempDir(), "netdoctor."+sh)
		if err := os.WriteFile(script, out.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		if sh != "bash" {
			if b, err := exec.Command(bin, "-n", script).CombinedOutput(); err != nil {
				t.Errorf("%s -n: %v\n%s", sh, err, b)
			}
			continue
		}
		for line, want := range map[string]string{
			"netdoctor run --server-n":             "--server-netns",
			"netdoctor lab run h":                  "healthy",
			"netdoctor tu":                         "tune",
			"netdoctor tune a":                     "apply",
			"netdoctor check --fail-on w":          "warning",
			"netdoctor help accept-q":              "accept-queue-overflow",
			"netdoctor help ru":                    "run",
			"netdoctor rules --format prometheusr": "prometheusrule",
		} {
			words := strings.Fields(line)
			probe := `source "$1"; COMP_WORDS=(` + strings.Join(words, " ") + `); COMP_CWORD=` + strconv.Itoa(len(words)-1) + `; _netdoctor; printf '%s\n' "${COMPREPLY[@]}"`
			b, err := exec.Command(bin, "-c", probe, "bash", script).CombinedOutput()
			if err != nil || !strings.Contains(string(b), want) {
				t.Errorf("bash completion of %q: %v %q, want %s", line, err, b, want)
			}
		}
	}
	var out bytes.Buffer
	if code := Run(context.Background(), []string{"completion", "tcsh"}, &out, &out); code != ExitUsage {
		t.Errorf("completion tcsh: exit %d", code)
	}
}

// TestManpages: a page per command line, which groff reads without a
// warning, with the command's flags and examples.
func TestManpages(t *testing.T) {
	pages := manPages(time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC))
	if len(pages) != len(commandDocs)+1 {
		t.Errorf("%d pages for %d commands", len(pages), len(commandDocs))
	}
	run := pages["netdoctor-run.1"]
	for _, want := range []string{".TH NETDOCTOR-RUN 1", `.B \-\-server\-netns`, ".SH EXAMPLES"} {
		if !strings.Contains(run, want) {
			t.Errorf("netdoctor-run.1 lacks %q", want)
		}
	}
	dir := t.TempDir()
	var out bytes.Buffer
	if code := Run(context.Background(), []string{"manpages", dir}, &out, &out); code != ExitOK {
		t.Fatalf("manpages: exit %d: %s", code, out.String())
	}
	groff, err := exec.LookPath("groff")
	if err != nil {
		t.Skip("groff not installed: the pages are not rendered")
	}
	for name := range pages {
		b, err := exec.Command(groff, "-man", "-ww", "-z", filepath.Join(dir, name)).CombinedOutput()
		if err != nil || len(b) > 0 {
			t.Errorf("groff %s: %v\n%s", name, err, b)
		}
	}
}

// TestHelpOnStdout: help is output the user asked for: on stdout, exit
// 0, for netdoctor, each command and each subcommand group, so that
// `netdoctor run --help | less` shows it. Without a command, the list
// goes to stderr with exit 2: that is a mistake.
func TestHelpOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "run"}, {"run", "--help"}, {"load", "-h"}, {"lab", "--help"}, {"tune", "-h"}, {"lab", "run", "-h"}, {"tune", "rollback", "-h"}, {"compare", "-h"}, {"lab", "clean", "-h"}} {
		var stdout, stderr bytes.Buffer
		code := Run(context.Background(), args, &stdout, &stderr)
		if code != ExitOK || stderr.Len() > 0 || !strings.Contains(stdout.String(), "usage") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
	}
	// Subcommands' help says what they take and shows an example.
	var out bytes.Buffer
	Run(context.Background(), []string{"tune", "rollback", "-h"}, &out, &out)
	if !strings.Contains(out.String(), "[JOURNAL]") || !strings.Contains(out.String(), "examples:") {
		t.Errorf("tune rollback -h:\n%s", out.String())
	}
	var stdout, stderr bytes.Buffer
	if code := Run(context.Background(), nil, &stdout, &stderr); code != ExitUsage || stdout.Len() > 0 || !strings.Contains(stderr.String(), "commands:") {
		t.Errorf("no arguments: exit %d, stdout %q", code, stdout.String())
	}
	for _, args := range [][]string{{"--version"}, {"-v"}, {"version"}} {
		stdout.Reset()
		if code := Run(context.Background(), args, &stdout, &stderr); code != ExitOK || !strings.HasPrefix(stdout.String(), "netdoctor "+Version+" (commit ") || !strings.Contains(stdout.String(), "\ngo: go") {
			t.Errorf("%v: exit %d, %q", args, code, stdout.String())
		}
	}
}

// TestHelpFlagsHeading: a command without flags prints no "flags:"
// heading and no "[flags]" in its usage; one with flags lists them.
func TestHelpFlagsHeading(t *testing.T) {
	for _, d := range commandDocs {
		var out bytes.Buffer
		Run(context.Background(), append(strings.Fields(d.Path), "--help"), &out, &out)
		has := len(flagsOf(d.Path)) > 0
		if strings.Contains(out.String(), "flags:") != has || strings.Contains(out.String(), "[flags]") != has {
			t.Errorf("%s (%d flags) --help:\n%s", d.Path, len(flagsOf(d.Path)), out.String())
		}
		if strings.Contains(out.String(), "flags:\n\n") {
			t.Errorf("%s --help has an empty flags: heading", d.Path)
		}
	}
}

// TestHelpFinding: `netdoctor help ID` says what a report's finding
// means; neither a command nor an ID is one line and exit 2.
func TestHelpFinding(t *testing.T) {
	code, stdout, _ := runCLI(t, "help", "accept-queue-overflow")
	if code != ExitOK || !strings.HasPrefix(stdout, "accept-queue-overflow: the application accepts connections more slowly than they arrive") || !strings.Contains(stdout, "active when: TcpExtListenOverflows rose") {
		t.Errorf("help accept-queue-overflow: exit %d\n%s", code, stdout)
	}
	code, _, stderr := runCLI(t, "help", "no-such-thing")
	if code != ExitUsage || stderr != "netdoctor: help no-such-thing: no such command or finding ID (netdoctor --help lists the commands, docs/findings.md the finding IDs)\n" {
		t.Errorf("help no-such-thing: exit %d, %q", code, stderr)
	}
}

// TestRunHelpJSON: run's --json - is the report alone on stdout, the
// text report left out: its help says so, not load's "the text to
// stderr".
func TestRunHelpJSON(t *testing.T) {
	_, stdout, _ := runCLI(t, "run", "--help")
	if !strings.Contains(stdout, "--json FILE\n      also write the JSON report to this file; - writes it to stdout instead of the text report") {
		t.Errorf("run --help:\n%s", stdout)
	}
	if _, stdout, _ = runCLI(t, "load", "--help"); !strings.Contains(stdout, "(- for stdout, and the text to stderr)") {
		t.Errorf("load --help:\n%s", stdout)
	}
}
