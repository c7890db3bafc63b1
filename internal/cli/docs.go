package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/lab"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// commandDoc describes one command line for its help, its man page and
// shell completion. The flags are not listed here: they are read from
// the FlagSet the command parses with (flagsOf), so the three cannot
// disagree with the parser.
type commandDoc struct {
	Path     string // "run", "lab run"
	Args     string // the positional arguments: "URL", "REPORT.json"
	Summary  string
	Examples []string
	// Complete names what the positional arguments are, for completion:
	// "file", "scenario" or "" (nothing to offer).
	Complete string
}

// commandDocs are every command line a user types, in help order.
var commandDocs = []commandDoc{
	{Path: "check", Summary: "Audit this host (or a namespace, or an agent's host) over a short window: the problems active now and the risks latent at scale.",
		Examples: []string{"netdoctor check", "netdoctor check --netns web --window 10s --json report.json", "netdoctor check --agent https://10.0.0.2:9120 --token-file agent.token"}},
	{Path: "collect", Summary: "Sample every collector each second and save the snapshots as an evidence bundle, for diagnose.",
		Examples: []string{"netdoctor collect --window 30s --out host.bundle.json"}},
	{Path: "diagnose", Args: "BUNDLE", Summary: "Run the rules on a saved bundle (collect's, run's --bundle, an agent's incident).", Complete: "file",
		Examples: []string{"netdoctor diagnose host.bundle.json", "netdoctor diagnose incident-20261124T030012Z-accept-queue-overflow.bundle.json.gz --json -"}},
	{Path: "load", Args: "URL", Summary: "HTTP load generator with wrk's flags: closed loop, or open loop at a rate (-R); HDR latency, a per-second timeline.",
		Examples: []string{"netdoctor load -c 100 -t 2 -d 10s http://127.0.0.1:8080/", "netdoctor load -R 5000 -d 30s --json - http://127.0.0.1:8080/ | jq .latency"}},
	{Path: "run", Args: "URL", Summary: "Load a service while sampling client and server every second, then diagnose the load window: every root cause with its evidence and fix.",
		Examples: []string{"netdoctor run -c 200 -d 10s http://127.0.0.1/", "ip netns exec client netdoctor run --server-netns server http://10.0.0.2/", "netdoctor run --server-agent http://10.0.0.2:9120 --token-file agent.token http://10.0.0.2/"}},
	{Path: "capacity", Args: "URL", Summary: "Find the highest request rate a service answers within its SLO (an open-loop search), what limited it there and how far the other resources were from their limits.",
		Examples: []string{"netdoctor capacity --slo 'p99<=100ms' http://127.0.0.1:8080/", "ip netns exec client netdoctor capacity --server-netns server --slo 'p99<=250ms' --html cap.html http://10.0.0.2/", "netdoctor capacity --verify-with plan.json --max-duration 4m --json cap.json http://127.0.0.1/"}},
	{Path: "agent", Summary: "Serve this host's evidence, and a diagnosis that runs all the time, over HTTP: for run --server-agent, check --agent and Prometheus.",
		Examples: []string{"netdoctor agent", "netdoctor agent --listen 0.0.0.0:9120 --token-file /etc/netdoctor/agent.token --incidents /var/lib/netdoctor/incidents"}},
	{Path: "rules", Summary: "Print Prometheus alerting rules for the agent's findings: one alert per finding, and per latent risk.",
		Examples: []string{"netdoctor rules > /etc/prometheus/rules/netdoctor.yml", "netdoctor rules --format prometheusrule --namespace monitoring | kubectl apply -f -"}},
	{Path: "lab list", Summary: "List the lab's scenarios: the seed cases rebuilt in network namespaces with real servers.",
		Examples: []string{"netdoctor lab list -v"}},
	{Path: "lab run", Args: "SCENARIO", Summary: "Build a scenario in two network namespaces, run netdoctor against it and print the diagnosis; with --fixed, fix it and compare.", Complete: "scenario",
		Examples: []string{"netdoctor lab run nginx-php-throughput --fixed", "netdoctor lab run accept-queue-backlog --agent", "netdoctor lab run nginx-php-throughput --tune"}},
	{Path: "lab clean", Summary: "Remove what a killed lab left: namespaces, processes, files, and the global settings it changed.",
		Examples: []string{"netdoctor lab clean"}},
	{Path: "tune plan", Args: "REPORT.json", Summary: "Turn a run's or check's report into a reviewed change set: each setting's current and proposed value, and why.", Complete: "file",
		Examples: []string{"netdoctor tune plan before.json --out plan.json"}},
	{Path: "tune apply", Args: "PLAN.json", Summary: "Apply a plan (a dry run unless --yes), journaling every previous value first.", Complete: "file",
		Examples: []string{"netdoctor tune apply plan.json", "netdoctor tune apply plan.json --yes --config"}},
	{Path: "tune rollback", Args: "[JOURNAL]", Summary: "Put back every value and file a tune apply changed, byte for byte.", Complete: "file",
		Examples: []string{"netdoctor tune rollback"}},
	{Path: "merge", Args: "RESULT.json...", Summary: "Merge the results of a distributed load's workers (load --segment i/N --json) into one, as one process would have recorded it: percentiles of the merged histogram, seconds summed by wall clock, each worker's saturation.", Complete: "file",
		Examples: []string{"netdoctor merge worker-1.json worker-2.json worker-3.json", "kubectl logs -l netdoctor.io/job=netdoctor-load --tail=-1 --max-log-requests=8 > results.json && netdoctor merge --json merged.json results.json"}},
	{Path: "compare", Args: "BEFORE.json AFTER.json", Summary: "Compare two reports: load figures side by side, findings gone and new.", Complete: "file",
		Examples: []string{"netdoctor compare before.json after.json"}},
	{Path: "completion", Args: "bash|zsh|fish", Summary: "Print the shell completion script for netdoctor.",
		Examples: []string{"netdoctor completion bash > /etc/bash_completion.d/netdoctor", "netdoctor completion fish > ~/.config/fish/completions/netdoctor.fish"}},
	{Path: "manpages", Args: "DIR", Summary: "Write netdoctor's man pages (netdoctor.1, netdoctor-run.1…) to a directory.",
		Examples: []string{"netdoctor manpages /usr/local/share/man/man1"}},
	{Path: "version", Summary: "Print netdoctor's version, the Go it was built with, and the kernel features it found.",
		Examples: []string{"netdoctor version", "netdoctor --version"}},
	{Path: "help", Args: "[COMMAND | FINDING-ID]", Summary: "Print a command's help, or what a finding ID of a report means: when it is active, when latent, and the seed case behind it.", Complete: "help",
		Examples: []string{"netdoctor help run", "netdoctor help " + exampleFinding()}},
}

// exampleFinding is the finding ID the help and the man page show: a
// full accept queue's, the example report's.
func exampleFinding() string {
	for _, c := range rules.Classes() {
		if c.Is == rules.AcceptQueueFull {
			return string(c.ID)
		}
	}
	return ""
}

// docOf returns the description of a command line ("run", "lab run").
func docOf(path string) (commandDoc, bool) {
	for _, d := range commandDocs {
		if d.Path == path {
			return d, true
		}
	}
	return commandDoc{}, false
}

// captured holds the FlagSets newFlags makes while flagsOf asks a
// command for its help.
var captured struct {
	sync.Mutex
	on  bool
	fss []*flag.FlagSet
}

// noteFlags lets flagsOf see a FlagSet the command defines.
func noteFlags(fs *flag.FlagSet) {
	captured.Lock()
	defer captured.Unlock()
	if captured.on {
		captured.fss = append(captured.fss, fs)
	}
}

// flagsOf returns the flags a command line parses with: the command is
// asked for its help (-h), which every command answers after defining
// its flags and before doing anything, and the FlagSet it made is kept.
func flagsOf(path string) []*flag.Flag {
	captured.Lock()
	captured.on, captured.fss = true, nil
	captured.Unlock()
	Run(context.Background(), append(strings.Fields(path), "-h"), io.Discard, io.Discard)
	captured.Lock()
	fss := captured.fss
	captured.on, captured.fss = false, nil
	captured.Unlock()
	var out []*flag.Flag
	for _, fs := range fss {
		if fs.Name() != "netdoctor "+path {
			continue
		}
		fs.VisitAll(func(f *flag.Flag) {
			if !hidden(f) {
				out = append(out, f)
			}
		})
	}
	return out
}

// takesValue reports whether a flag needs a value (not a bool switch).
func takesValue(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// valueName is the placeholder for a flag's value, from its name and
// type: FILE, DURATION, N, URL, NS or VALUE.
func valueName(f *flag.Flag) string {
	switch {
	case strings.Contains(f.Name, "file") || slices.Contains([]string{"json", "html", "bundle", "out", "o", "script", "s", "tls-cert", "tls-key", "agent-ca", "verify-with"}, f.Name):
		return "FILE"
	case f.Name == "incidents":
		return "DIR"
	case strings.Contains(f.Name, "agent") || f.Name == "runbook":
		return "URL"
	case strings.Contains(f.Name, "netns"):
		return "NS"
	}
	switch f.Value.(type) {
	case durationFlag, wrkDurationFlag:
		return "DURATION"
	case wrkIntFlag:
		return "N"
	}
	switch name, _ := flag.UnquoteUsage(f); name {
	case "int", "uint", "float", "int64", "uint64":
		return "N"
	case "duration":
		return "DURATION"
	}
	return "VALUE"
}

// writeHelp prints a command line's help: usage, what it does, its
// flags with their defaults, and examples.
func writeHelp(w io.Writer, fs *flag.FlagSet) {
	path := strings.TrimPrefix(fs.Name(), "netdoctor ")
	d, _ := docOf(path)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	usage := "netdoctor " + path
	if n > 0 {
		usage += " [flags]"
	}
	if d.Args != "" {
		usage += " " + d.Args
	}
	fmt.Fprintf(w, "usage: %s\n", usage)
	if d.Summary != "" {
		fmt.Fprintf(w, "\n%s\n", d.Summary)
	}
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
	}
	fs.VisitAll(func(f *flag.Flag) {
		if hidden(f) {
			return
		}
		head := "  " + flagName(f.Name)
		if takesValue(f) {
			head += " " + valueName(f)
		}
		_, usage := flag.UnquoteUsage(f)
		fmt.Fprintf(w, "%s\n      %s%s\n", head, usage, defaultNote(f))
	})
	if len(d.Examples) > 0 {
		fmt.Fprintln(w, "\nexamples:")
		for _, e := range d.Examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// subcommandHelp lists a command's subcommands (lab, tune) with what
// each does.
func subcommandHelp(w io.Writer, top string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: netdoctor %s SUBCOMMAND [flags]\n\nsubcommands:\n", top)
	for _, d := range commandDocs {
		if t, sub, ok := strings.Cut(d.Path, " "); ok && t == top {
			fmt.Fprintf(&b, "  %-9s %s\n", sub, d.Summary)
		}
	}
	fmt.Fprintf(&b, "\nnetdoctor %s SUBCOMMAND --help for its flags and examples.\n", top)
	_, err := io.WriteString(w, b.String())
	return err
}

// defaultNote is " (default X)" when the flag has a default worth
// saying and its usage does not say it already.
func defaultNote(f *flag.Flag) string {
	def := f.DefValue
	switch def {
	case "", "0", "false", "0s", "[]":
		return ""
	}
	if strings.Contains(f.Usage, "default") {
		return ""
	}
	return fmt.Sprintf(" (default %s)", def)
}

// runCompletion prints a completion script for a shell.
func runCompletion(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("completion", stderr)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("completion needs a shell: bash, zsh or fish")
	}
	switch pos[0] {
	case "bash":
		return writeBashCompletion(stdout)
	case "zsh":
		return writeZshCompletion(stdout)
	case "fish":
		return writeFishCompletion(stdout)
	}
	return badInput("completion: no shell %q: bash, zsh or fish", pos[0])
}

// valueCompletion says what a flag's value completes to: "file", "dir",
// "netns" (the names `ip netns list` shows), or "words" with the words;
// "" for a value nothing can offer (a count, a URL).
func valueCompletion(f *flag.Flag) (kind string, words []string) {
	if !takesValue(f) {
		return "", nil
	}
	switch valueName(f) {
	case "FILE":
		return "file", nil
	case "DIR":
		return "dir", nil
	case "NS":
		return "netns", nil
	}
	switch f.Name {
	case "fail-on":
		return "words", []string{string(failCritical), string(failWarning), string(failNever)}
	case "format":
		return "words", []string{"prometheus", "prometheusrule"}
	}
	return "", nil
}

// valueFlags groups every command's value flags by what their values
// complete to: kind, or "words:W1 W2" → the flags as typed.
func valueFlags() (kinds []string, flags map[string][]string) {
	flags = map[string][]string{}
	for _, d := range commandDocs {
		for _, f := range flagsOf(d.Path) {
			kind, words := valueCompletion(f)
			if kind == "" {
				continue
			}
			if kind == "words" {
				kind += ":" + strings.Join(words, " ")
			}
			if _, ok := flags[kind]; !ok {
				kinds = append(kinds, kind)
			}
			if name := flagName(f.Name); !slices.Contains(flags[kind], name) {
				flags[kind] = append(flags[kind], name)
			}
		}
	}
	return kinds, flags
}

// helpWords are what `netdoctor help` completes to: the commands and
// the finding IDs.
func helpWords() []string {
	out := topCommands()
	for _, c := range rules.Classes() {
		out = append(out, string(c.ID))
	}
	return out
}

// netnsList is the shell command that lists the named network
// namespaces, as `ip netns list` finds them.
const netnsList = "ls /run/netns 2>/dev/null"

// completionWords are, per command line, its flags as typed.
func completionWords() map[string][]string {
	out := map[string][]string{}
	for _, d := range commandDocs {
		var words []string
		for _, f := range flagsOf(d.Path) {
			words = append(words, flagName(f.Name))
		}
		out[d.Path] = append(words, "--help")
	}
	return out
}

func topCommands() []string {
	var out []string
	for _, d := range commandDocs {
		top, _, _ := strings.Cut(d.Path, " ")
		if !slices.Contains(out, top) {
			out = append(out, top)
		}
	}
	return out
}

func subCommands(top string) []string {
	var out []string
	for _, d := range commandDocs {
		if t, sub, ok := strings.Cut(d.Path, " "); ok && t == top {
			out = append(out, sub)
		}
	}
	return out
}

func writeBashCompletion(w io.Writer) error {
	words := completionWords()
	var b strings.Builder
	b.WriteString("# bash completion for netdoctor; generated by `netdoctor completion bash`.\n_netdoctor() {\n")
	b.WriteString("  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd=${COMP_WORDS[1]}\n")
	b.WriteString("  if [ \"$COMP_CWORD\" -eq 1 ]; then COMPREPLY=($(compgen -W \"" + strings.Join(topCommands(), " ") + " --help --version\" -- \"$cur\")); return; fi\n")
	// A flag's value: files, directories, namespaces, fixed words.
	kinds, vflags := valueFlags()
	b.WriteString("  case $prev in\n")
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %s) ", strings.Join(vflags[k], "|"))
		switch {
		case k == "file":
			b.WriteString("COMPREPLY=($(compgen -f -- \"$cur\")); return;;\n")
		case k == "dir":
			b.WriteString("COMPREPLY=($(compgen -d -- \"$cur\")); return;;\n")
		case k == "netns":
			b.WriteString("COMPREPLY=($(compgen -W \"$(" + netnsList + ")\" -- \"$cur\")); return;;\n")
		default:
			fmt.Fprintf(&b, "COMPREPLY=($(compgen -W %q -- \"$cur\")); return;;\n", strings.TrimPrefix(k, "words:"))
		}
	}
	b.WriteString("  esac\n")
	b.WriteString("  case $cmd in\n")
	for _, top := range topCommands() {
		if subs := subCommands(top); len(subs) > 0 {
			fmt.Fprintf(&b, "  %s) if [ \"$COMP_CWORD\" -eq 2 ]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi; cmd=\"%s ${COMP_WORDS[2]}\";;\n", top, strings.Join(subs, " "), top)
		}
	}
	b.WriteString("  esac\n  case $cmd in\n")
	for _, d := range commandDocs {
		fmt.Fprintf(&b, "  %q)\n    if [[ $cur == -* ]]; then COMPREPLY=($(compgen -W %q -- \"$cur\")); return; fi\n", d.Path, strings.Join(words[d.Path], " "))
		switch d.Complete {
		case "file":
			b.WriteString("    COMPREPLY=($(compgen -f -- \"$cur\"));;\n")
		case "scenario":
			fmt.Fprintf(&b, "    COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n", strings.Join(scenarioNames(), " "))
		case "help":
			fmt.Fprintf(&b, "    COMPREPLY=($(compgen -W %q -- \"$cur\"));;\n", strings.Join(helpWords(), " "))
		default:
			b.WriteString("    ;;\n")
		}
	}
	b.WriteString("  esac\n}\ncomplete -o default -F _netdoctor netdoctor\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeZshCompletion(w io.Writer) error {
	words := completionWords()
	var b strings.Builder
	b.WriteString("#compdef netdoctor\n# zsh completion for netdoctor; generated by `netdoctor completion zsh`.\n_netdoctor() {\n")
	// Not "path": zsh ties $path to $PATH.
	b.WriteString("  local cmd=${words[2]}\n")
	b.WriteString("  if (( CURRENT == 2 )); then compadd -- " + strings.Join(topCommands(), " ") + " --help --version; return; fi\n")
	kinds, vflags := valueFlags()
	b.WriteString("  case ${words[CURRENT-1]} in\n")
	for _, k := range kinds {
		fmt.Fprintf(&b, "  %s) ", strings.Join(vflags[k], "|"))
		switch {
		case k == "file":
			b.WriteString("_files; return;;\n")
		case k == "dir":
			b.WriteString("_files -/; return;;\n")
		case k == "netns":
			b.WriteString("compadd -- $(" + netnsList + "); return;;\n")
		default:
			fmt.Fprintf(&b, "compadd -- %s; return;;\n", strings.TrimPrefix(k, "words:"))
		}
	}
	b.WriteString("  esac\n")
	b.WriteString("  case $path in\n")
	for _, top := range topCommands() {
		if subs := subCommands(top); len(subs) > 0 {
			fmt.Fprintf(&b, "  %s) if (( CURRENT == 3 )); then compadd -- %s; return; fi; cmd=\"%s ${words[3]}\";;\n", top, strings.Join(subs, " "), top)
		}
	}
	b.WriteString("  esac\n  case $cmd in\n")
	for _, d := range commandDocs {
		fmt.Fprintf(&b, "  %q) if [[ $PREFIX == -* ]]; then compadd -- %s; ", d.Path, strings.Join(words[d.Path], " "))
		switch d.Complete {
		case "file":
			b.WriteString("else _files; fi;;\n")
		case "scenario":
			fmt.Fprintf(&b, "else compadd -- %s; fi;;\n", strings.Join(scenarioNames(), " "))
		case "help":
			fmt.Fprintf(&b, "else compadd -- %s; fi;;\n", strings.Join(helpWords(), " "))
		default:
			b.WriteString("fi;;\n")
		}
	}
	// Autoloaded from fpath the file is the function's first call:
	// complete now; sourced, register.
	b.WriteString("  esac\n}\nif [ \"$funcstack[1]\" = _netdoctor ]; then _netdoctor \"$@\"; else compdef _netdoctor netdoctor; fi\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeFishCompletion(w io.Writer) error {
	var b strings.Builder
	b.WriteString("# fish completion for netdoctor; generated by `netdoctor completion fish`.\n")
	b.WriteString("complete -c netdoctor -f\n")
	for _, d := range commandDocs {
		top, sub, hasSub := strings.Cut(d.Path, " ")
		cond := "__fish_use_subcommand"
		if hasSub {
			if sub == subCommands(top)[0] {
				fmt.Fprintf(&b, "complete -c netdoctor -n '__fish_seen_subcommand_from %s; and not __fish_seen_subcommand_from %s' -a %q\n", top, strings.Join(subCommands(top), " "), strings.Join(subCommands(top), " "))
			}
			cond = fmt.Sprintf("__fish_seen_subcommand_from %s; and __fish_seen_subcommand_from %s", top, sub)
		} else {
			fmt.Fprintf(&b, "complete -c netdoctor -n __fish_use_subcommand -a %s -d %q\n", top, firstSentence(d.Summary))
			cond = "__fish_seen_subcommand_from " + top
		}
		for _, f := range flagsOf(d.Path) {
			_, usage := flag.UnquoteUsage(f)
			opt := "-l " + f.Name
			if len(f.Name) == 1 {
				opt = "-s " + f.Name
			}
			req := ""
			if takesValue(f) {
				req = " -r"
			}
			switch kind, words := valueCompletion(f); kind {
			case "file", "dir":
				req = " -r -F"
			case "netns":
				req = " -x -a '(" + netnsList + ")'"
			case "words":
				req = fmt.Sprintf(" -x -a %q", strings.Join(words, " "))
			}
			fmt.Fprintf(&b, "complete -c netdoctor -n '%s' %s%s -d %q\n", cond, opt, req, firstSentence(usage))
		}
		switch d.Complete {
		case "file":
			fmt.Fprintf(&b, "complete -c netdoctor -n '%s' -F\n", cond)
		case "scenario":
			fmt.Fprintf(&b, "complete -c netdoctor -n '%s' -a %q\n", cond, strings.Join(scenarioNames(), " "))
		case "help":
			fmt.Fprintf(&b, "complete -c netdoctor -n '%s' -a %q\n", cond, strings.Join(helpWords(), " "))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// firstSentence shortens a usage to what fits a completion menu.
func firstSentence(s string) string {
	s, _, _ = strings.Cut(s, ": ")
	s, _, _ = strings.Cut(s, "; ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}

// runManpages writes a man page per command line, and netdoctor(1).
func runManpages(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("manpages", stderr)
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return badInput("manpages needs a directory to write to")
	}
	dir := pos[0]
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return badInput("manpages: %s is not a directory", dir)
	}
	// Reproducible builds date the pages from the source.
	date := time.Now()
	if sec, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		date = time.Unix(sec, 0)
	}
	pages := manPages(date)
	names := make([]string, 0, len(pages))
	for name := range pages {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := writeOut(filepath.Join(dir, name), stdout, "man page", func(w io.Writer) error {
			_, err := io.WriteString(w, pages[name])
			return err
		}); err != nil {
			return err
		}
	}
	_, err = fmt.Fprintf(stdout, "wrote %d man pages to %s\n", len(names), dir)
	return err
}

// manPages renders netdoctor.1 and netdoctor-PATH.1 for each command
// line, in troff with the man macros.
func manPages(now time.Time) map[string]string {
	date := now.UTC().Format("2006-01-02")
	head := func(name, what string) string {
		return fmt.Sprintf(".TH %s 1 %q %q \"netdoctor manual\"\n.SH NAME\n%s \\- %s\n", strings.ToUpper(name), date, "netdoctor "+Version, roffEscape(name), roffEscape(what))
	}
	pages := map[string]string{}
	var top strings.Builder
	top.WriteString(head("netdoctor", "find why a Linux service is slow under load"))
	top.WriteString(".SH SYNOPSIS\n.B netdoctor\n.I command\n[flags]\n.SH DESCRIPTION\nnetdoctor loads an HTTP service while sampling the kernel's evidence on both ends, then names every root cause with its evidence and the exact fix. Each command has its own page.\n")
	top.WriteString(quickStartRoff)
	top.WriteString(".SH COMMANDS\n")
	for _, d := range commandDocs {
		fmt.Fprintf(&top, ".TP\n.BR netdoctor\\-%s (1)\n%s\n", strings.ReplaceAll(d.Path, " ", "\\-"), roffEscape(d.Summary))
	}
	top.WriteString(".SH EXIT STATUS\n.TP\n0\nno active critical finding (or none at the level of \\-\\-fail\\-on)\n.TP\n1\nactive critical findings\n.TP\n2\nbad flags or input\n.TP\n3\nnot permitted: needs root\n.TP\n4\nno report could be made\n.TP\n5\npartial: a side's evidence was lost midway\n")
	top.WriteString(".SH SEE ALSO\nhttps://github.com/netdoctor/netdoctor\n")
	pages["netdoctor.1"] = top.String()
	for _, d := range commandDocs {
		name := "netdoctor-" + strings.ReplaceAll(d.Path, " ", "-")
		var b strings.Builder
		what, _, _ := strings.Cut(strings.TrimSuffix(d.Summary, "."), ": ")
		b.WriteString(head(name, what))
		fmt.Fprintf(&b, ".SH SYNOPSIS\n.B netdoctor %s\n[flags]", d.Path)
		if d.Args != "" {
			fmt.Fprintf(&b, "\n.I %s", roffEscape(d.Args))
		}
		fmt.Fprintf(&b, "\n.SH DESCRIPTION\n%s\n", roffEscape(d.Summary))
		if flags := flagsOf(d.Path); len(flags) > 0 {
			b.WriteString(".SH OPTIONS\n")
			for _, f := range flags {
				b.WriteString(".TP\n.B " + roffEscape(flagName(f.Name)))
				if takesValue(f) {
					b.WriteString(" \\fI" + roffEscape(valueName(f)) + "\\fR")
				}
				_, usage := flag.UnquoteUsage(f)
				b.WriteString("\n" + roffEscape(usage+defaultNote(f)) + "\n")
			}
		}
		if len(d.Examples) > 0 {
			b.WriteString(".SH EXAMPLES\n")
			for _, e := range d.Examples {
				b.WriteString(".PP\n.nf\n" + roffEscape(e) + "\n.fi\n")
			}
		}
		b.WriteString(".SH SEE ALSO\n.BR netdoctor (1)\n")
		pages[name+".1"] = b.String()
	}
	return pages
}

// quickStartRoff is netdoctor(1)'s quick start, the README's in short:
// check this host, read the verdict and the fixes, then load a service.
var quickStartRoff = ".SH QUICK START\n" +
	".PP\nLook at this host for five seconds, as root (sock_diag, other processes' sockets, the kernel log):\n" +
	".PP\n.nf\n" + roffEscape("sudo netdoctor check") + "\n.fi\n" +
	".PP\nThe first line is the verdict: " + roffEscape("HEALTHY, LATENT (nothing hurts now, something will at scale), DEGRADED, UNHEALTHY or UNEXPLAINED (the load suffered and no finding says why)") +
	". Then each finding: [SEVERITY status] title (its ID), the evidence (* observed during the window), and its fixes, each the action first and why after it:\n" +
	".PP\n.nf\n" + roffEscape("UNHEALTHY: Accept queue overflow: connections are dropped because the application does not accept them fast enough\n\n"+
	"1. [CRITICAL active] Accept queue overflow: ...  ("+exampleFinding()+")\n"+
	"   * TcpExtListenOverflows +1093 in 5s (218.3/s)\n"+
	"   * listener 127.0.0.1:8000 (python3 pid 812): accept queue 6 of 5 — full; ...\n"+
	"   fix: raise the listen() backlog of 127.0.0.1:8000 (python3 pid 812) to 4096 — Python: socketserver's\n"+
	"        `request_queue_size = 4096` ...; then restart it  (why 4096: the queue must hold ...)") + "\n.fi\n" +
	".PP\n" + roffEscape("netdoctor help "+exampleFinding()+" says what a finding means; netdoctor tune plan r.json (from check --json r.json) turns the fixes into reviewed changes.") + "\n" +
	".PP\nThen load a service while netdoctor watches both ends, and read the same report with the load beside it:\n" +
	".PP\n.nf\n" + roffEscape("sudo netdoctor run -c 50 -d 10 --html run.html http://127.0.0.1:8000/") + "\n.fi\n" +
	".PP\nExit status 1 means an active critical finding (below); 2 a mistake, said in one line before anything is measured.\n"

// roffEscape keeps text literal in troff: backslashes and hyphens
// escaped, and no line starting with a control character.
func roffEscape(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	var b strings.Builder
	for _, r := range s {
		if r > 127 {
			// groff reads ASCII; others by their code point.
			fmt.Fprintf(&b, `\[u%04X]`, r)
			continue
		}
		b.WriteRune(r)
	}
	lines := strings.Split(b.String(), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, ".") || strings.HasPrefix(l, "'") {
			lines[i] = `\&` + l
		}
	}
	return strings.Join(lines, "\n")
}

// scenarioNames are the lab's scenarios, for completion.
func scenarioNames() []string { return lab.Names() }
