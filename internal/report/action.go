package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// Action is one step of a finding's fix, as data: what to change, where,
// and the words a person reads. Rules make actions with the constructors
// below (SetSysctl, Command, Edit, Relisten, Advise); the finding's Fix lines
// are rendered from them (Render), and no code reads a line back: tune
// and relate read the typed fields.
type Action struct {
	// Kind says which of the fields below say what to do.
	Kind ActionKind `json:"kind"`
	// Command is the shell command to run as it stands (sysctl,
	// command).
	Command string `json:"command,omitempty"`
	// Setting and Value are a sysctl's name and value, unquoted.
	Setting string `json:"setting,omitempty"`
	Value   string `json:"value,omitempty"`
	// Scope is where Command acts: "host" (the namespace netdoctor ran
	// in, for a global setting the host's) or "netns NAME".
	Scope string `json:"scope,omitempty"`
	// Persist is the command that keeps a sysctl across reboots; empty
	// when no host file applies (another namespace's setting: Note says
	// where to set it).
	Persist string `json:"persist,omitempty"`
	// Config and File are a configuration change (the directives) and
	// where to make it (path:line).
	Config string `json:"config,omitempty"`
	File   string `json:"file,omitempty"`
	// App is the server whose configuration or socket the action
	// changes: "nginx", "php-fpm", or a process's name (config, listen).
	App string `json:"app,omitempty"`
	// Addr, PIDs and Backlog are a listening socket, the processes that
	// own it, and the backlog it must listen() with (listen).
	Addr    string `json:"addr,omitempty"`
	PIDs    []int  `json:"pids,omitempty"`
	Backlog int    `json:"backlog,omitempty"`
	// Note is the advice for a person: all of a note, for the other
	// kinds the words around the action (why, caveats, how to reload).
	Note string `json:"note,omitempty"`

	// Tag names an advice that code looks for, so that it never looks
	// for words (TagBiggerPool). Not part of the report.
	Tag string `json:"-"`
	// Lines are the fix's lines for this action, as the text and HTML
	// reports print them: made with the action by its constructor, from
	// the fields above and the rule's words. Not in the report's JSON,
	// whose "fix" holds them (Render). A renderer that puts the action
	// first can build its own from the typed fields and Note.
	Lines []string `json:"-"`
}

// ActionKind says what an action does.
type ActionKind string

// Action kinds.
const (
	ActionSysctl  ActionKind = "sysctl"  // set Setting to Value: Command, then Persist
	ActionCommand ActionKind = "command" // run Command
	ActionConfig  ActionKind = "config"  // change File as Config says, then reload App (Note says how)
	ActionListen  ActionKind = "listen"  // have the socket at Addr listen() again with Backlog
	ActionNote    ActionKind = "note"    // advice for a person, nothing to run as is
)

// Tags of advice that code looks for.
const (
	// TagBiggerPool is the advice on the size of a client's pool of
	// connections to a dependency (grow it; not yet, the host's CPU
	// being busy), which relate replaces when the dependency is itself
	// at capacity.
	TagBiggerPool = "bigger-pool"
)

// Render is a finding's fix as a person reads it: its actions' lines, in
// order.
func Render(actions []Action) []string {
	out := []string{}
	for _, a := range actions {
		out = append(out, a.Lines...)
	}
	return out
}

// Advise is advice for a person, one line: nothing to run as it stands.
func Advise(text string) Action {
	return Action{Kind: ActionNote, Note: text, Lines: []string{text}}
}

// Advice is one note per line.
func Advice(lines ...string) []Action {
	out := make([]Action, len(lines))
	for i, l := range lines {
		out[i] = Advise(l)
	}
	return out
}

// Command is a command the user runs as it stands, in netdoctor's namespace,
// and why: the line "CMD  (WHY)".
func Command(cmd, why string) Action {
	return Action{Kind: ActionCommand, Command: cmd, Scope: "host", Note: why, Lines: []string{cmd + "  (" + why + ")"}}
}

// SetSysctl sets a kernel setting: in the namespace ns names (a name or
// a /proc/PID/ns/net path, as netns.Parse reads it; "" is netdoctor's
// own), or, when global, host-wide, where only the initial namespace
// writes it. Its lines are the `sysctl -w` (entering ns for a setting of
// another namespace) and "persist: " with how to keep it across reboots:
// in the host's namespace a file of its own under /etc/sysctl.d, which
// running it again replaces rather than appends to; /etc/sysctl.d is
// read for the initial namespace only, so another namespace's setting is
// kept where the namespace is made.
func SetSysctl(name, value, ns string, global bool) Action {
	prefix := ""
	if !global {
		prefix = netns.Parse(ns).ExecPrefix()
	}
	a := Action{Kind: ActionSysctl, Command: fmt.Sprintf("%ssysctl -w %s=%s", prefix, name, quote(value)), Setting: name, Value: value, Scope: "host"}
	keep := Keep(name, value, ns, global)
	if prefix == "" {
		a.Persist = keep
	} else {
		a.Scope = "netns " + ns
		a.Note = "persist: " + keep
	}
	a.Lines = []string{a.Command, "persist: " + keep}
	return a
}

// Keep says how to keep a setting across reboots, as SetSysctl's
// "persist: " line does: a command in the host's namespace, else where
// to set it.
func Keep(name, value, ns string, global bool) string {
	if global || netns.Parse(ns).ExecPrefix() == "" {
		return fmt.Sprintf("echo '%s = %s' > %s", name, value, PersistPath(name))
	}
	return fmt.Sprintf("not in /etc/sysctl.d, which is read for the initial namespace only: run the command above where the namespace is created (its setup script, the CNI plugin's tuning), or give the container the sysctl (docker run --sysctl %s=%s, Kubernetes securityContext.sysctls)", name, quote(value))
}

// quote quotes a value with blanks for the shell: "10000 65535".
func quote(v string) string {
	if strings.ContainsAny(v, " \t") {
		return strconv.Quote(v)
	}
	return v
}

// PersistPath is the file the persist advice writes one setting to:
// /etc/sysctl.d/90-netdoctor-NAME.conf. `tune apply --persist` writes
// /etc/sysctl.d/90-netdoctor.conf, read after it.
func PersistPath(name string) string { return "/etc/sysctl.d/90-netdoctor-" + name + ".conf" }

// Because adds why to a command or a sysctl, on the action's own line:
// "CMD  (WHY)".
func (a Action) Because(why string) Action {
	a.Lines = append([]string{a.Lines[0] + "  (" + why + ")"}, a.Lines[1:]...)
	if a.Note == "" {
		a.Note = why
	} else {
		a.Note = why + "; " + a.Note
	}
	return a
}

// Worded says the action in a sentence of the rule's own, one line that
// replaces the kind's form (a command given inside advice); the
// sentence is the action's note too.
func (a Action) Worded(line string) Action {
	a.Lines = []string{line}
	a.Note = line
	return a
}

// Edit is a change to a configuration file at a line: the directives to
// write at file (path:line) of app ("nginx", "php-fpm"), and text, the
// line that says it for a person, with how to reload.
func Edit(app, file string, directives []string, text string) Action {
	return Action{Kind: ActionConfig, Config: strings.Join(directives, " "), File: file, App: app, Note: text, Lines: []string{text}}
}

// Relisten is a listening socket that must listen() with a larger
// backlog: the one at addr, owned by app's processes pids. The kernel
// fixes a socket's backlog when it listens, so its application's setting
// takes effect at a restart (or when `tune apply` calls listen() on the
// socket again); text says it for a person.
func Relisten(app, addr string, pids []int, backlog int, text string) Action {
	return Action{Kind: ActionListen, App: app, Addr: addr, PIDs: pids, Backlog: backlog, Note: text, Lines: []string{text}}
}
