package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/journal"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/procnet"
	"github.com/netdoctor/netdoctor/internal/safepath"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// StateDir holds one journal per live lab: what it created and the
// previous value of every global it changed, written before the change.
// It is on tmpfs, like the changes it records: a reboot clears both.
var StateDir = "/run/netdoctor-lab"

// state is a lab's journal, enough for Close, or Clean after the lab's
// process was killed, to undo the lab: its owner and its changes in the
// order they were made, undone latest first.
type state struct {
	journal.Owner
	Changes []change `json:"changes"`
	path    string
}

// change is one thing a lab made or changed: a namespace it created (its
// processes are killed, then it is deleted), a directory it made (removed
// with what is in it, or only when empty), or a host-wide setting with
// its value from before.
type change struct {
	Netns    string  `json:"netns,omitempty"`
	Dir      string  `json:"dir,omitempty"`
	EmptyDir string  `json:"empty_dir,omitempty"`
	Global   *global `json:"global,omitempty"`
}

// global is a host-wide sysctl a lab changed and the value to restore.
type global struct {
	Sysctl string `json:"sysctl"`
	Old    string `json:"old"`
}

// file is the /proc/sys file of the setting: how Clean names it, and the
// key under which labs compare the globals they changed.
func (g global) file() string { return "/proc/" + procnet.SysctlPath(g.Sysctl) }

// legacyState is the journal's first shape, written by netdoctor before
// the journal package: the start time as a string, and the changes by
// kind with globals by /proc path. readState still reads it, so that a
// lab killed under an older netdoctor is cleaned by this one.
type legacyState struct {
	Start   string   `json:"start"`
	Netns   []string `json:"netns"`
	Paths   []string `json:"paths"`
	Globals []struct {
		Path string `json:"path"`
		Old  string `json:"old"`
	} `json:"globals"`
}

// save writes the journal durably: the previous value must be on disk
// before the global changes, or a crash in between loses it.
func (s *state) save() error { return journal.Save(s.path, s) }

func newState(id string, changes []change) (*state, error) {
	if err := safepath.PrivateDir(StateDir); err != nil {
		return nil, fmt.Errorf("lab journal: %w", err)
	}
	s := &state{Owner: journal.Self(), Changes: changes, path: filepath.Join(StateDir, id+".json")}
	return s, s.save()
}

// readState reads a journal of either shape.
func readState(path string) (*state, error) {
	var j struct {
		state
		legacyState
	}
	if err := journal.Read(path, &j); err != nil {
		return nil, err
	}
	s := &j.state
	s.path = path
	if l := j.legacyState; l.Start != "" || len(l.Netns)+len(l.Paths)+len(l.Globals) > 0 {
		s.Start, _ = strconv.ParseUint(l.Start, 10, 64)
		for _, p := range l.Paths {
			s.Changes = append(s.Changes, change{Dir: p})
		}
		for _, n := range l.Netns {
			s.Changes = append(s.Changes, change{Netns: n})
		}
		for _, g := range l.Globals {
			// A /proc path is a sysctl name with slashes.
			s.Changes = append(s.Changes, change{Global: &global{Sysctl: strings.TrimPrefix(g.Path, "/proc/sys/"), Old: g.Old}})
		}
	}
	return s, nil
}

func (s *state) remove() error {
	if err := os.Remove(s.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// undo reverts the changes latest first (see journal.Undo), and removes
// the journal once all are undone. Globals that other live labs changed
// too (held) are left to them; with lockErr, the lock under which held is
// read was not taken, and no global is touched. It returns one line per
// thing undone.
func (s *state) undo(held map[string]string, lockErr error) ([]string, error) {
	var done []string
	err := journal.Undo(s.Changes, journal.LatestFirst, func(c change) error {
		if c.Global != nil && lockErr != nil {
			return fmt.Errorf("restore %s: %w", c.Global.file(), lockErr)
		}
		d, err := c.undo(held)
		done = append(done, d...)
		return err
	}, s.remove)
	return done, err
}

func (c change) undo(held map[string]string) ([]string, error) {
	switch {
	case c.Netns != "":
		return deleteNetns(c.Netns)
	case c.Dir != "":
		if _, err := os.Stat(c.Dir); err != nil {
			return nil, nil
		}
		if err := os.RemoveAll(c.Dir); err != nil {
			return nil, err
		}
		return []string{"removed " + c.Dir}, nil
	case c.EmptyDir != "":
		// It fails, harmlessly, while another lab still has files in it.
		if os.Remove(c.EmptyDir) == nil {
			return []string{"removed " + c.EmptyDir}, nil
		}
		return nil, nil
	case c.Global != nil:
		return c.Global.restore(held)
	}
	return nil, nil
}

// restore puts the setting back in the initial namespace, unless another
// live lab holds it changed: that lab restores the same original value
// when it ends.
func (g global) restore(held map[string]string) ([]string, error) {
	if _, ok := held[g.file()]; ok {
		return nil, nil
	}
	host, err := netns.Initial()
	if err == nil {
		err = sysctl.Write(host, g.Sysctl, g.Old)
	}
	if err != nil {
		return nil, fmt.Errorf("restore %s: %w", g.file(), err)
	}
	return []string{fmt.Sprintf("restored %s to %s", g.file(), strings.TrimSpace(g.Old))}, nil
}

// lockState serialises changes to globals between labs in different
// processes (two labs, or test packages run in parallel).
// The directory is root's alone (safepath.PrivateDir): Clean acts on
// every journal in it.
func lockState() (func(), error) {
	if err := safepath.PrivateDir(StateDir); err != nil {
		return nil, fmt.Errorf("lab journal: %w", err)
	}
	return journal.Lock(StateDir)
}

// otherLabs returns, for each global that live labs other than the one
// journaled at self changed, keyed by its /proc/sys file, the value from
// before the first change.
func otherLabs(self string) map[string]string {
	out := map[string]string{}
	paths, _ := journal.List(StateDir)
	for _, p := range paths {
		if p == self {
			continue
		}
		s, err := readState(p)
		if err != nil || !s.Alive() {
			continue
		}
		for _, c := range s.Changes {
			if g := c.Global; g != nil {
				if _, ok := out[g.file()]; !ok {
					out[g.file()] = g.Old
				}
			}
		}
	}
	return out
}

// LiveChanges returns the globals that running labs hold changed, keyed
// by /proc/sys file, each with its value from before the first change.
func LiveChanges() map[string]string { return otherLabs("") }
