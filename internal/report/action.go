package report

import (
	"regexp"
	"strings"
)

// Action is one fix line (or a setting's two, the change and how to keep
// it) as a script reads it; Finding.Fix keeps the lines for a person.
type Action struct {
	// Kind is ActionSysctl, ActionCommand, ActionConfig or ActionNote.
	Kind string `json:"kind"`
	// Command is the shell command to run as it stands (sysctl, command).
	Command string `json:"command,omitempty"`
	// Setting and Value are a sysctl's name and value, unquoted.
	Setting string `json:"setting,omitempty"`
	Value   string `json:"value,omitempty"`
	// Scope is where Command acts: "host" (the namespace netdoctor ran
	// in, for a global setting the host's), "netns NAME" or "process PID".
	Scope string `json:"scope,omitempty"`
	// Persist is the command that keeps a sysctl across reboots; empty
	// when no host file applies (another namespace's setting: Note says
	// where to set it).
	Persist string `json:"persist,omitempty"`
	// Config and File are a configuration change (the directives) and
	// where to make it (path:line).
	Config string `json:"config,omitempty"`
	File   string `json:"file,omitempty"`
	// Note is the advice for a person: all of a note, the rest of the
	// line for the other kinds.
	Note string `json:"note,omitempty"`
}

// Action kinds.
const (
	ActionSysctl  = "sysctl"  // set Setting to Value: Command, then Persist
	ActionCommand = "command" // run Command
	ActionConfig  = "config"  // change File as Config says, then reload (Note)
	ActionNote    = "note"    // advice for a person, nothing to run as is
)

var (
	// sysctlLine is the runtime line the rules write for a setting
	// (rules.sysctlFix), with an optional "  (note)".
	sysctlLine = regexp.MustCompile(`^(?:ip netns exec (\S+) |nsenter --net=(\S+) )?sysctl -w ([a-z0-9_.-]+)=("[^"]*"|\S+)(?:  \((.+)\))?$`)
	// commandLine is a command to run as it stands, then "  (note)".
	commandLine = regexp.MustCompile("^((?:echo|prlimit|nft|ip|tc|ethtool) [^`]+?)  \\((.+)\\)$")
	pidArg      = regexp.MustCompile(`--pid (\d+)`)
	directive   = regexp.MustCompile("`([^`]+)`")
	fileLine    = regexp.MustCompile(`(/[^\s():,]+:\d+)`)
)

// Actions reads a finding's fix lines as actions, in order: a setting's
// `sysctl -w` and its "persist:" line are one sysctl action; a command
// that stands alone is a command; a change to a configuration file the
// line names (path:line) is a config action; everything else is a note.
func Actions(fix []string) []Action {
	var out []Action
	for i := 0; i < len(fix); i++ {
		line := fix[i]
		if m := sysctlLine.FindStringSubmatch(line); m != nil {
			a := Action{Kind: ActionSysctl, Command: strings.TrimSuffix(line, "  ("+m[5]+")"), Setting: m[3], Value: strings.Trim(m[4], `"`), Scope: "host", Note: m[5]}
			if ns := m[1] + m[2]; ns != "" {
				a.Scope = "netns " + ns
			}
			if i+1 < len(fix) && strings.HasPrefix(fix[i+1], "persist: ") {
				i++
				p := strings.TrimPrefix(fix[i], "persist: ")
				if strings.HasPrefix(p, "echo ") && strings.Contains(p, " > /etc/sysctl.d/") {
					a.Persist = p
				} else {
					a.Note = strings.TrimPrefix(a.Note+"; persist: "+p, "; ")
				}
			}
			out = append(out, a)
			continue
		}
		if m := commandLine.FindStringSubmatch(line); m != nil {
			a := Action{Kind: ActionCommand, Command: m[1], Scope: "host", Note: m[2]}
			if p := pidArg.FindStringSubmatch(m[1]); p != nil {
				a.Scope = "process " + p[1]
			}
			out = append(out, a)
			continue
		}
		if d, f := directive.FindAllStringSubmatch(line, -1), fileLine.FindString(line); d != nil && f != "" {
			var cfg []string
			for _, m := range d {
				cfg = append(cfg, m[1])
			}
			out = append(out, Action{Kind: ActionConfig, Config: strings.Join(cfg, " "), File: f, Note: line})
			continue
		}
		out = append(out, Action{Kind: ActionNote, Note: line})
	}
	return out
}
