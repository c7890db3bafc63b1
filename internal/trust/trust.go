package trust

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// ErrUntrusted is wrapped by every refusal: a file, directory, symlink or
// process that someone other than root controls.
var ErrUntrusted = errors.New("not root's alone")

// Mode says what a file read on a process's behalf must be.
type Mode int

const (
	// Owned files are root's and writable by root alone, down a path of
	// directories that are too: configurations, includes, binaries,
	// modules.
	Owned Mode = iota
	// Written files are regular files with one link, of any owner, down
	// a path whose symlinks only root could have made: the logs a server
	// writes.
	Written
)

func (m Mode) String() string {
	if m == Written {
		return "written"
	}
	return "owned"
}

// maxHops bounds the symlinks one path may follow (the kernel's 40).
const maxHops = 40

// FS reads the files under Root by Mode: "/" for this host's files,
// /proc/PID/root for a process's own view (a container's). Absolute
// symlinks resolve inside Root, ".." stops at it. FS implements fs.FS,
// so the parsers that take one (phpfpm, nginx) read through it; a
// directory opened through it can be listed (fs.Glob).
type FS struct {
	Root string
	Mode Mode
}

// Open implements fs.FS: name is relative to Root, as fs.ValidPath wants.
func (f FS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	file, err := f.open("/" + name)
	if err != nil {
		return nil, err
	}
	return file, nil
}

// ProcessFS is the FS of pid's own root, for a process that runs as
// root (Process); a process of another user gets an error wrapping
// ErrUntrusted and nothing is read on its behalf.
func ProcessFS(proc string, pid int, mode Mode) (FS, error) {
	if err := Process(proc, pid); err != nil {
		return FS{}, err
	}
	return FS{Root: filepath.Join(proc, strconv.Itoa(pid), "root"), Mode: mode}, nil
}

// Process checks that pid runs as root: its real, effective, saved and
// filesystem user IDs are all 0 (/proc/PID/status, as this host's
// namespace sees them: a container's root in a user namespace is not).
func Process(proc string, pid int) error {
	b, err := readSmall(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	uids, err := parseUIDs(string(b))
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, err)
	}
	for _, u := range uids {
		if u != 0 {
			return fmt.Errorf("pid %d runs as uid %d: %w", pid, u, ErrUntrusted)
		}
	}
	return nil
}

// parseUIDs reads the "Uid:" line of /proc/PID/status: real, effective,
// saved set and filesystem user IDs.
func parseUIDs(status string) ([]int, error) {
	for line := range strings.Lines(status) {
		v, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 4 {
			break
		}
		uids := make([]int, 0, 4)
		for _, s := range f {
			n, err := strconv.Atoi(s)
			if err != nil {
				return nil, fmt.Errorf("status: bad Uid %q", s)
			}
			uids = append(uids, n)
		}
		return uids, nil
	}
	return nil, errors.New("status: no Uid line")
}

// components splits a cleaned absolute or relative path.
func components(p string) []string {
	var out []string
	for c := range strings.SplitSeq(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

// untrusted builds a refusal.
func untrusted(p, format string, args ...any) error {
	return fmt.Errorf("%s %s: %w", path.Clean(p), fmt.Sprintf(format, args...), ErrUntrusted)
}

func itoa(n int) string { return strconv.Itoa(n) }
