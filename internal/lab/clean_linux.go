package lab

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"

	"github.com/netdoctor/netdoctor/internal/journal"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// procfs is the host's /proc: the lab runs in the host's PID namespace.
var procfs = procnet.Proc{FS: os.DirFS("/proc")}

// labNetns matches the namespaces New creates.
var labNetns = regexp.MustCompile(`^nd-.+-(srv|cli|dep)$`)

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
	// Under the lock from the first read of the journals to the last
	// removal: a lab that New starts meanwhile makes its directory and
	// journal under it too, so it is either read here as live or made
	// after Clean is done, never removed as a leftover half-built (a
	// test's lab lost its directory to a test of Clean beside it).
	unlock, err := lockState()
	if err != nil {
		return nil, err
	}
	defer unlock()
	var done []string
	var errs []error
	live := map[string]bool{} // namespaces and directories of live labs
	paths, err := journal.List(StateDir)
	if err != nil {
		errs = append(errs, err)
	}
	var dead []*state
	for _, p := range paths {
		s, err := readState(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("lab journal: %w", err))
			continue
		}
		if !s.Alive() {
			dead = append(dead, s)
			continue
		}
		for _, c := range s.Changes {
			for _, k := range []string{c.Netns, c.Dir} {
				if k != "" {
					live[k] = true
				}
			}
		}
	}
	for _, s := range dead {
		d, err := s.undo(otherLabs(s.path), nil)
		done = append(done, d...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	// Leftovers without a journal (a lab killed before writing one, or
	// from an older netdoctor): namespaces and directories by name.
	names, err := netns.List()
	if err != nil {
		errs = append(errs, err)
	}
	for _, n := range names {
		if !labNetns.MatchString(n) || live[n] {
			continue
		}
		d, err := deleteNetns(n)
		if err != nil {
			errs = append(errs, err)
		}
		done = append(done, d...)
	}
	for _, pattern := range []string{filepath.Join(os.TempDir(), "netdoctor-lab-*"), "/etc/netns/nd-*"} {
		paths, _ := filepath.Glob(pattern)
		for _, p := range paths {
			if live[p] || live[filepath.Base(p)] || !ownDir(p) {
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

// deleteNetns kills every process in namespace ns and deletes it; a
// namespace already gone is no error.
func deleteNetns(ns string) ([]string, error) {
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
		return nil, nil
	}
	done := killIn(ns)
	if err := netns.Delete(ns); err != nil {
		return done, err
	}
	return append(done, "deleted namespace "+ns), nil
}

// killIn kills every process in namespace ns but this one (a test
// binary may have a thread there) and says which.
func killIn(ns string) []string {
	var done []string
	pids, _ := netns.PIDs(netns.Parse(ns))
	for _, pid := range pids {
		if pid == os.Getpid() {
			continue
		}
		st, _ := procfs.Stat(strconv.Itoa(pid))
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			done = append(done, fmt.Sprintf("killed %d (%s) in %s", pid, st.Comm, ns))
		}
	}
	return done
}

// ownDir: p is a directory (not a symlink) this user owns. /tmp is
// everyone's: a netdoctor-lab-* another user made is not a lab's, and
// root removing it would be the very pre-emption a sticky /tmp guards.
func ownDir(p string) bool {
	fi, err := os.Lstat(p)
	if err != nil || !fi.IsDir() {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Geteuid()
}
