package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	"github.com/netdoctor/netdoctor/internal/durable"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// StateDir holds one journal per live lab: what it created and the
// previous value of every global it changed, written before the change.
// It is on tmpfs, like the changes it records: a reboot clears both.
var StateDir = "/run/netdoctor-lab"

// state is a lab's journal, enough for Clean to undo a lab whose process
// was killed before Close could run.
type state struct {
	PID     int      `json:"pid"`
	Start   string   `json:"start"` // the owner's start time (/proc/PID/stat field 22): tells a reused PID apart
	Netns   []string `json:"netns"`
	Paths   []string `json:"paths"` // directories to remove
	Globals []global `json:"globals"`
	journal string
}

type global struct {
	Path string `json:"path"`
	Old  string `json:"old"`
}

// save writes the journal durably: the previous value must be on disk
// before the global changes, or a crash in between loses it.
func (s *state) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return durable.WriteFile(s.journal, b, 0o600, durable.Keep, durable.Keep)
}

func newState(id string, netns []string) (*state, error) {
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		return nil, fmt.Errorf("lab journal: %w", err)
	}
	s := &state{PID: os.Getpid(), Start: startTime(os.Getpid()), Netns: netns,
		journal: filepath.Join(StateDir, id+".json")}
	return s, s.save()
}

func (s *state) remove() error {
	if err := os.Remove(s.journal); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// startTime returns when pid started (/proc/PID/stat's starttime), or
// "" when pid is gone.
func startTime(pid int) string {
	st, err := procfs.Stat(strconv.Itoa(pid))
	if err != nil {
		return ""
	}
	return strconv.FormatUint(st.StartTime, 10)
}

// procfs is the host's /proc: the lab runs in the host's PID namespace.
var procfs = procnet.Proc{FS: os.DirFS("/proc")}

func (s *state) alive() bool {
	return s.PID > 0 && s.Start != "" && startTime(s.PID) == s.Start
}

// lockState serialises changes to globals between labs in different
// processes (two labs, or test packages run in parallel).
func lockState() (func(), error) {
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(StateDir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}

// otherLabs returns, for each global that live labs other than the one
// journaled at self changed, the value from before the first change.
func otherLabs(self string) map[string]string {
	out := map[string]string{}
	journals, _ := filepath.Glob(filepath.Join(StateDir, "*.json"))
	for _, j := range journals {
		if j == self {
			continue
		}
		b, err := os.ReadFile(j)
		if err != nil {
			continue
		}
		var s state
		if json.Unmarshal(b, &s) != nil || !s.alive() {
			continue
		}
		for _, g := range s.Globals {
			if _, ok := out[g.Path]; !ok {
				out[g.Path] = g.Old
			}
		}
	}
	return out
}

// LiveChanges returns the globals that running labs hold changed, each
// with its value from before the first change.
func LiveChanges() map[string]string { return otherLabs("") }

// labNetns matches the namespaces New creates.
var labNetns = regexp.MustCompile(`^nd-.+-(srv|cli)$`)

// Clean undoes what labs whose process died left behind (a run killed
// with SIGKILL cannot run Close): it restores the globals they changed to
// the values their journals saved, kills the processes inside their
// namespaces, deletes the namespaces (their veths, qdiscs and nft tables
// go with them) and removes their files. Labs whose owner is still
// running are left alone. It returns one line per thing undone.
func Clean() ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNeedsRoot
	}
	var done []string
	var errs []error
	live := map[string]bool{}
	liveDirs := map[string]bool{}
	journals, _ := filepath.Glob(filepath.Join(StateDir, "*.json"))
	var dead []*state
	for _, j := range journals {
		b, err := os.ReadFile(j)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		s := &state{journal: j}
		if err := json.Unmarshal(b, s); err != nil {
			errs = append(errs, fmt.Errorf("lab journal %s: %v", j, err))
			continue
		}
		if s.alive() {
			for _, n := range s.Netns {
				live[n] = true
			}
			for _, p := range s.Paths {
				liveDirs[p] = true
			}
			continue
		}
		dead = append(dead, s)
	}
	unlock, err := lockState()
	if err != nil {
		return nil, err
	}
	defer unlock()
	for _, s := range dead {
		var serr []error
		live := otherLabs(s.journal)
		// Latest change first, so a global changed twice ends at its
		// value from before the lab; one a live lab changed too is
		// left to that lab, which restores the same original value.
		for i := len(s.Globals) - 1; i >= 0; i-- {
			g := s.Globals[i]
			if _, ok := live[g.Path]; ok {
				continue
			}
			if err := os.WriteFile(g.Path, []byte(g.Old), 0o644); err != nil {
				serr = append(serr, fmt.Errorf("restore %s: %w", g.Path, err))
				continue
			}
			done = append(done, fmt.Sprintf("restored %s to %s", g.Path, strings.TrimSpace(g.Old)))
		}
		for _, n := range s.Netns {
			if d, err := deleteNetns(n); err != nil {
				serr = append(serr, err)
			} else {
				done = append(done, d...)
			}
		}
		for _, p := range s.Paths {
			if _, err := os.Stat(p); err == nil {
				if err := os.RemoveAll(p); err != nil {
					serr = append(serr, err)
				} else {
					done = append(done, "removed "+p)
				}
			}
		}
		if len(serr) == 0 {
			os.Remove(s.journal)
		}
		errs = append(errs, serr...)
	}
	// Leftovers without a journal (a lab killed before writing one, or
	// from an older netdoctor): namespaces and directories by name.
	if out, err := exec.Command("ip", "netns", "list").Output(); err == nil {
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 || !labNetns.MatchString(f[0]) || live[f[0]] {
				continue
			}
			d, err := deleteNetns(f[0])
			if err != nil {
				errs = append(errs, err)
			}
			done = append(done, d...)
		}
	}
	for _, pattern := range []string{filepath.Join(os.TempDir(), "netdoctor-lab-*"), "/etc/netns/nd-*"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if liveDirs[p] || live[filepath.Base(p)] {
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
				continue
			}
			done = append(done, "removed "+p)
		}
	}
	return done, errors.Join(errs...)
}

// deleteNetns kills every process in namespace ns and deletes it.
func deleteNetns(ns string) ([]string, error) {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
		return nil, nil
	}
	done := killIn(ns)
	if err := run("ip", "netns", "del", ns); err != nil {
		return done, err
	}
	return append(done, "deleted namespace "+ns), nil
}

// killIn kills every process in namespace ns but this one (a test
// binary may have a thread there) and says which.
func killIn(ns string) []string {
	var done []string
	out, _ := exec.Command("ip", "netns", "pids", ns).Output()
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid == os.Getpid() {
			continue
		}
		st, _ := procfs.Stat(f)
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			done = append(done, fmt.Sprintf("killed %d (%s) in %s", pid, st.Comm, ns))
		}
	}
	return done
}
