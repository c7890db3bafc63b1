package tune

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/report"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// Version is the plan and journal format's version.
const Version = 1

// Change kinds.
const (
	KindSysctl = "sysctl" // a /proc/sys setting
	KindFile   = "file"   // an application's configuration file
	KindListen = "listen" // a listening socket's backlog, set again with listen()
)

// Plan is an ordered change set. Apply runs it in order: kernel settings
// first (a listen() after them takes the new limits), then configuration
// files (each validated and reloaded), then listeners.
type Plan struct {
	Version int       `json:"version"`
	Created time.Time `json:"created"`
	// Report is the report the plan was computed from; Command its kind
	// ("run" or "check"); Target the URL a run loaded.
	Report  string   `json:"report"`
	Command string   `json:"command"`
	Target  string   `json:"target,omitempty"`
	Kernel  string   `json:"kernel"`
	Changes []Change `json:"changes"`
	// Notes are findings the plan has no automatic change for, and why.
	Notes []string `json:"notes,omitempty"`
	// Seen is each targeted finding as the report showed it ("critical
	// active"): a verification whose first run does not show a finding
	// (another fault in the way, a different moment) says what the plan
	// was made against instead of guessing.
	Seen map[string]string `json:"seen,omitempty"`
}

// seen records the plan's targets as the report showed them.
func (p *Plan) seen(fs []report.Finding) {
	for _, c := range p.Changes {
		for _, target := range c.Findings {
			if f, ok := find(fs, target); ok {
				if p.Seen == nil {
					p.Seen = map[string]string{}
				}
				p.Seen[target] = string(f.Severity) + " " + string(f.Status)
			}
		}
	}
}

// Change is one reviewed change.
type Change struct {
	Kind string `json:"kind"`
	// Key identifies the change within the plan and in a journal.
	Key string `json:"key"`
	// Findings are the findings it targets ("id subject", as in the
	// report); Why says how the value follows from their evidence.
	Findings []string  `json:"findings"`
	Why      []string  `json:"why"`
	Sysctl   *Sysctl   `json:"sysctl,omitempty"`
	File     *File     `json:"file,omitempty"`
	Listen   *Listener `json:"listen,omitempty"`
}

// Scope says which network namespace a setting lives in.
type Scope struct {
	// Global settings (fs.*, nf_conntrack_max, net.core.rmem_max…) exist
	// once per host; they are read and written in the initial namespace.
	Global bool `json:"global,omitempty"`
	// NetNS is the namespace's name or path; empty: the namespace apply
	// runs in, which must then be the one whose inode is NetNSInode.
	NetNS      string `json:"netns,omitempty"`
	NetNSInode uint64 `json:"netns_inode,omitempty"`
}

func (s Scope) String() string {
	switch {
	case s.Global:
		return "host-wide"
	case s.NetNS != "":
		return "netns " + s.NetNS
	}
	return "this namespace"
}

// Sysctl is one kernel setting.
type Sysctl struct {
	Name     string `json:"name"`
	Current  string `json:"current"`
	Proposed string `json:"proposed"`
	Scope
	// Persist is the line for /etc/sysctl.d/90-netdoctor.conf.
	Persist string `json:"persist"`
}

// PersistFile is where --persist writes kernel settings.
const PersistFile = "/etc/sysctl.d/90-netdoctor.conf"

// File is one configuration file's change.
type File struct {
	Path string `json:"path"`
	App  string `json:"app"` // "nginx", "php-fpm"
	// Old and New are the contents' SHA-256; apply refuses a file that no
	// longer hashes to Old (it changed since the plan).
	Old     string `json:"old_sha256"`
	New     string `json:"new_sha256"`
	Diff    string `json:"diff"`
	Content string `json:"content"` // the whole new file
	// Validate checks the new configuration (`nginx -t -c …`); Reload
	// signals the master that reads it.
	Validate []string `json:"validate"`
	Reload   Reload   `json:"reload"`
}

// Reload is a signal to an application's master process.
type Reload struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start_time"` // procnet starttime, to tell a reused PID apart
	Exe    string `json:"exe"`
	Signal string `json:"signal"` // "HUP", "USR2"
}

func (r Reload) String() string { return fmt.Sprintf("kill -%s %d (%s)", r.Signal, r.PID, r.Exe) }

// Listener is a listening socket whose backlog is set again with
// listen(), because the kernel caps it at net.core.somaxconn once, when the
// application listens, and the application would not listen again short
// of a restart.
type Listener struct {
	Addr     string `json:"addr"`
	PID      int    `json:"pid"`
	Start    uint64 `json:"start_time"`
	Comm     string `json:"comm"`
	Current  int    `json:"current"`  // the effective backlog now
	Backlog  int    `json:"backlog"`  // what the application asks listen() for (-1: the limit)
	Proposed int    `json:"proposed"` // the effective backlog after the plan
	Scope
}

// Input is a report as `run --json` or `check --json` writes it (a
// check report has no load, sides or servers).
type Input = report.Run

// ReadInput decodes a run, check or diagnose report.
func ReadInput(r io.Reader) (*Input, error) {
	in, err := report.Read(r)
	var k *report.KindError
	if errors.As(err, &k) {
		return nil, fmt.Errorf("not a netdoctor run or check report: %w", k)
	}
	if err != nil {
		return nil, err
	}
	if in.Command != "run" && in.Command != "check" && in.Command != "diagnose" {
		return nil, fmt.Errorf("a netdoctor %s report has no kernel evidence to plan from: plan from a run's or a check's report", in.Command)
	}
	return in, nil
}

// ReadPlan decodes a plan.
func ReadPlan(r io.Reader) (*Plan, error) {
	var p Plan
	dec := json.NewDecoder(capped.Reader(r, capped.Plan, "plan"))
	dec.DisallowUnknownFields() // a report or a bundle is not a plan
	if err := dec.Decode(&p); err != nil {
		if errors.Is(err, capped.ErrTooLarge) {
			return nil, err
		}
		return nil, fmt.Errorf("not a netdoctor plan: %w", err)
	}
	if p.Version != Version {
		return nil, fmt.Errorf("not a netdoctor plan (version %d, want %d)", p.Version, Version)
	}
	for i, c := range p.Changes {
		ok := (c.Kind == KindSysctl && c.Sysctl != nil) || (c.Kind == KindFile && c.File != nil) || (c.Kind == KindListen && c.Listen != nil)
		if !ok {
			return nil, fmt.Errorf("plan change %d: kind %q without its %s", i+1, c.Kind, c.Kind)
		}
	}
	return &p, nil
}

// key names a finding as plans and verdicts refer to it.
func key(f report.Finding) string {
	return strings.TrimSpace(string(f.ID) + " " + f.Subject)
}

// add merges a change into the plan: the same setting in the same scope
// targeted by two findings is one change with the larger value and both
// reasons.
func (p *Plan) add(c Change) {
	for i := range p.Changes {
		o := &p.Changes[i]
		if o.Key != c.Key {
			continue
		}
		for _, f := range c.Findings {
			if !slices.Contains(o.Findings, f) {
				o.Findings = append(o.Findings, f)
			}
		}
		for _, w := range c.Why {
			if !slices.Contains(o.Why, w) {
				o.Why = append(o.Why, w)
			}
		}
		if o.Sysctl != nil && c.Sysctl != nil && larger(c.Sysctl.Proposed, o.Sysctl.Proposed) {
			o.Sysctl.Proposed, o.Sysctl.Persist = c.Sysctl.Proposed, c.Sysctl.Persist
		}
		return
	}
	p.Changes = append(p.Changes, c)
}

// order puts kernel settings first, then files, then listeners: a
// listener re-listens under the new limit, and a reloaded nginx listens
// again with its new backlog under the new somaxconn.
func (p *Plan) order() {
	rank := map[string]int{KindSysctl: 0, KindFile: 1, KindListen: 2}
	slices.SortStableFunc(p.Changes, func(a, b Change) int { return rank[a.Kind] - rank[b.Kind] })
}

// Text writes the plan for a reviewer.
func (p *Plan) Text(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Plan from %s report %s (kernel %s)", p.Command, p.Report, p.Kernel)
	if p.Target != "" {
		fmt.Fprintf(&b, ", load on %s", p.Target)
	}
	fmt.Fprintf(&b, ": %d changes\n", len(p.Changes))
	for i, c := range p.Changes {
		fmt.Fprintf(&b, "\n%d. %s\n", i+1, c.Title())
		fmt.Fprintf(&b, "   for: %s\n", strings.Join(c.Findings, ", "))
		for _, w := range c.Why {
			fmt.Fprintf(&b, "   why: %s\n", w)
		}
		switch {
		case c.Sysctl != nil:
			fmt.Fprintf(&b, "   persist: %s\n", c.Sysctl.persistText())
		case c.File != nil:
			fmt.Fprintf(&b, "   validate: %s; reload: %s\n", strings.Join(c.File.Validate, " "), c.File.Reload)
			for _, l := range strings.SplitAfter(strings.TrimRight(c.File.Diff, "\n"), "\n") {
				b.WriteString("   | " + strings.TrimRight(l, "\n") + "\n")
			}
		}
	}
	if len(p.Notes) > 0 {
		b.WriteString("\nNot planned:\n")
		for _, n := range p.Notes {
			fmt.Fprintf(&b, "  - %s\n", n)
		}
	}
	// A plan is a file read back, perhaps from elsewhere: its text
	// goes through the one sanitiser.
	_, err := io.WriteString(printable.NewWriter(w), b.String())
	return err
}

// persistText says how the setting outlasts a reboot: in PersistFile
// (apply --persist) for the host's namespace; for another namespace,
// where that namespace is made, since /etc/sysctl.d is read for the
// initial namespace only.
func (s *Sysctl) persistText() string {
	if s.Global || s.NetNS == "" {
		return s.Persist + " in " + PersistFile + " (apply --persist)"
	}
	v := s.Proposed
	if strings.ContainsAny(v, " \t") {
		v = fmt.Sprintf("%q", v)
	}
	return fmt.Sprintf("not in %s, which is read for the initial namespace only: `%ssysctl -w %s=%s` where %s is created (its setup script, the CNI plugin's tuning), or the container's sysctls (docker run --sysctl %s=%s, Kubernetes securityContext.sysctls)",
		PersistFile, netns.Parse(s.NetNS).ExecPrefix(), s.Name, v, s.NetNS, s.Name, v)
}

// Title is the change in one line.
func (c Change) Title() string {
	switch {
	case c.Sysctl != nil:
		s := c.Sysctl
		return fmt.Sprintf("sysctl %s: %s → %s (%s)", s.Name, s.Current, s.Proposed, s.Scope)
	case c.File != nil:
		return fmt.Sprintf("%s config %s (%d lines changed)", c.File.App, c.File.Path, changedLines(c.File.Diff))
	case c.Listen != nil:
		l := c.Listen
		return fmt.Sprintf("listen() again on %s (%s pid %d): backlog %d → %d (%s)", l.Addr, l.Comm, l.PID, l.Current, l.Proposed, l.Scope)
	}
	return c.Key
}

func changedLines(diff string) int {
	n := 0
	for _, l := range strings.Split(diff, "\n") {
		if (strings.HasPrefix(l, "+") && !strings.HasPrefix(l, "+++")) || (strings.HasPrefix(l, "-") && !strings.HasPrefix(l, "---")) {
			n++
		}
	}
	return n
}
