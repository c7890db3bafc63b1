package app

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// What findLogs reads at most: a server's processes, the descriptors of
// each, and the logs it keeps. Another user's process may hold 10 000
// descriptors; its logs are among its first few in practice.
const (
	maxLogProcs   = 16
	maxLogFDs     = 4096
	maxFoundLogs  = 8
	maxFdinfoRead = 512
)

// findLogs adds the log files the server's processes hold open for
// appending (O_APPEND, written: the way every logger opens its file),
// whatever the server: a regular file, reached by the path the
// descriptor's link names, through the process's root. A process that
// does not run as root has its logs read only where it owns them: a
// descriptor it was handed to another user's file (a daemon that opened
// it before dropping its privileges) is not read on its say-so. What is
// read goes through Log's own checks (trust.Written: no symlink another
// user could have made, no FIFO, one link).
func (o *Observer) findLogs(s *Server) {
	known := map[string]bool{}
	for _, l := range s.Logs {
		known[l.Path] = true
	}
	buf := make([]byte, 8192)
	found := 0
	for _, pid := range s.PIDs[:min(len(s.PIDs), maxLogProcs)] {
		uid, ok := euid(o.proc, pid)
		if !ok {
			continue
		}
		dir := filepath.Join(o.proc, strconv.Itoa(pid))
		n := 0
		_, _ = listFDs(filepath.Join(dir, "fd"), 0, buf, func(fd int) bool {
			n++
			if n > maxLogFDs || found >= maxFoundLogs {
				return false
			}
			fdName := strconv.Itoa(fd)
			if !appending(filepath.Join(dir, "fdinfo", fdName)) {
				return true
			}
			target, err := os.Readlink(filepath.Join(dir, "fd", fdName))
			if err != nil || !strings.HasPrefix(target, "/") || strings.HasSuffix(target, " (deleted)") || known[target] {
				return true
			}
			var st unix.Stat_t
			if unix.Stat(filepath.Join(dir, "fd", fdName), &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || (uid != 0 && st.Uid != uid) {
				return true
			}
			known[target] = true
			found++
			s.Logs = append(s.Logs, &Log{Path: target, Kind: "found", Source: "fd " + fdName + " of pid " + strconv.Itoa(pid), root: filepath.Join(dir, "root")})
			return true
		})
	}
}

// appending reports a descriptor open for writing with O_APPEND, from
// its fdinfo's "flags:" line (octal).
func appending(fdinfo string) bool {
	f, err := os.Open(fdinfo)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 256), maxFdinfoRead)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "flags:")
		if !ok {
			continue
		}
		flags, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		return err == nil && flags&syscall.O_APPEND != 0 && flags&syscall.O_ACCMODE != syscall.O_RDONLY
	}
	return false
}

// euid is the effective user of pid, from its status file.
func euid(proc string, pid int) (uint32, bool) {
	f, err := os.Open(filepath.Join(proc, strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "Uid:"); ok {
			fs := strings.Fields(v)
			if len(fs) < 2 {
				return 0, false
			}
			u, err := strconv.ParseUint(fs[1], 10, 32)
			return uint32(u), err == nil
		}
	}
	return 0, false
}
