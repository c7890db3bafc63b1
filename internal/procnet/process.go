package procnet

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Process reads what netdoctor wants to know about the process pid from
// PID/stat (command name, CPU time), PID/status (threads), PID/limits (the
// open files limit) and PID/fd (the open files). Role is left empty.
//
// If PID/stat cannot be read, the process is most likely gone: only PID is
// set and the read error is returned unwrapped. The other files are read
// independently: when one of them fails, the rest are still filled and
// the error is returned with them. In particular, when PID/fd cannot be
// read (it needs ptrace access to the process), OpenFDs is -1.
//
// See do_task_stat in https://elixir.bootlin.com/linux/v6.6/source/fs/proc/array.c
// and proc_pid_limits in https://elixir.bootlin.com/linux/v6.6/source/fs/proc/base.c.
func (p Proc) Process(pid int) (kernel.Process, error) {
	dir := strconv.Itoa(pid)
	b, err := fs.ReadFile(p.FS, dir+"/stat")
	if err != nil {
		return kernel.Process{PID: pid}, err
	}
	pr, err := parsePIDStat(b)
	pr.PID = pid // the stat file of a procfs from another PID namespace differs
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	if b, err := fs.ReadFile(p.FS, dir+"/status"); err != nil {
		errs = append(errs, err)
	} else if pr.Threads, err = parsePIDStatus(b); err != nil {
		errs = append(errs, err)
	}
	if b, err := fs.ReadFile(p.FS, dir+"/limits"); err != nil {
		errs = append(errs, err)
	} else if pr.NofileSoft, pr.NofileHard, err = parsePIDLimits(b); err != nil {
		errs = append(errs, err)
	}
	if pr.OpenFDs, err = p.countFDs(dir + "/fd"); err != nil {
		pr.OpenFDs = -1
		errs = append(errs, err)
	}
	return pr, joinErrs(errs)
}

// Stat reads one PID/stat, or a thread's PID/task/TID/stat when path
// names one, alone: comm, state, parent and CPU times, without the
// limits and descriptor counts Process adds.
func (p Proc) Stat(path string) (kernel.Process, error) {
	b, err := fs.ReadFile(p.FS, path+"/stat")
	if err != nil {
		return kernel.Process{}, err
	}
	return parsePIDStat(b)
}

// statFieldsAfterComm is the number of PID/stat fields needed after the
// command name: state(0) ... utime(11) stime(12) ... starttime(19), plus
// one so that a file cut short inside starttime is noticed.
const statFieldsAfterComm = 21

// parsePIDStat parses PID/stat for the pid, the command name and the CPU
// times. The command name is enclosed in parentheses but may itself hold
// spaces, parentheses and even newlines, as in "12 (my (weird) proc) S
// ...", so it ends at the last ')' of the file.
func parsePIDStat(b []byte) (kernel.Process, error) {
	pe := parseErrs{file: "PID/stat"}
	var pr kernel.Process
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		pe.addf(0, "no command name in parentheses")
		return pr, pe.err()
	}
	pr.Comm = string(b[open+1 : end])
	pid, err := strconv.ParseUint(string(bytes.TrimSpace(b[:open])), 10, 31)
	if err != nil {
		pe.addf(0, "pid: %v", err)
	}
	pr.PID = int(pid)
	rest := b[end+1:]
	if n := countFields(rest); n < statFieldsAfterComm {
		pe.addf(0, "want at least %d fields after the command name, got %d", statFieldsAfterComm, n)
		return pr, pe.err()
	}
	f, rest := nextField(rest)
	pr.State = string(f)
	f, rest = nextField(rest)
	if pr.PPID, err = strconv.Atoi(string(f)); err != nil {
		pe.addf(0, "ppid: %v", err)
	}
	for range 9 { // skip pgrp to cmajflt
		_, rest = nextField(rest)
	}
	f, rest = nextField(rest)
	if pr.UTime, err = strconv.ParseUint(string(f), 10, 64); err != nil {
		pe.addf(0, "utime: %v", err)
	}
	f, rest = nextField(rest)
	if pr.STime, err = strconv.ParseUint(string(f), 10, 64); err != nil {
		pe.addf(0, "stime: %v", err)
	}
	for range 6 { // skip cutime to itrealvalue
		_, rest = nextField(rest)
	}
	f, _ = nextField(rest)
	if pr.StartTime, err = strconv.ParseUint(string(f), 10, 64); err != nil {
		pe.addf(0, "starttime: %v", err)
	}
	return pr, pe.err()
}

// parsePIDStatus returns the thread count of PID/status, from its line
// "Threads:\t4".
func parsePIDStatus(b []byte) (int, error) {
	pe := parseErrs{file: "PID/status"}
	body, _ := completeLines(b)
	for lineNo := 1; len(body) > 0; lineNo++ {
		var line []byte
		line, body = nextLine(body)
		v, ok := bytes.CutPrefix(line, []byte("Threads:"))
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 31)
		if err != nil {
			pe.addf(lineNo, "Threads: %v", err)
		}
		return int(n), pe.err()
	}
	pe.addf(0, "no complete Threads line")
	return 0, pe.err()
}

// parsePIDLimits returns the soft and hard limits of the line
//
//	Max open files            1024                 524288               files
//
// of PID/limits, with "unlimited" as 0.
func parsePIDLimits(b []byte) (soft, hard uint64, err error) {
	pe := parseErrs{file: "PID/limits"}
	body, _ := completeLines(b)
	for lineNo := 1; len(body) > 0; lineNo++ {
		var line []byte
		line, body = nextLine(body)
		rest, ok := bytes.CutPrefix(line, []byte("Max open files"))
		if !ok {
			continue
		}
		var s, h []byte
		s, rest = nextField(rest)
		h, _ = nextField(rest)
		var err1, err2 error
		soft, err1 = parseLimit(s)
		hard, err2 = parseLimit(h)
		if err := errors.Join(err1, err2); err != nil {
			pe.addf(lineNo, "Max open files: %v", err)
		}
		return soft, hard, pe.err()
	}
	pe.addf(0, "no complete Max open files line")
	return 0, 0, pe.err()
}

// parseLimit parses one resource limit, "unlimited" being 0.
func parseLimit(b []byte) (uint64, error) {
	if string(b) == "unlimited" {
		return 0, nil
	}
	return strconv.ParseUint(string(b), 10, 64)
}

// countDir returns the number of entries in the directory name. It reads
// the names only, in batches, and never stats an entry: an entry of
// PID/fd is a link to a file the caller may not be allowed to stat, and
// a process can have a million of them.
func countDir(fsys fs.FS, name string) (int, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	d, ok := f.(fs.ReadDirFile)
	if !ok {
		return 0, &fs.PathError{Op: "readdir", Path: name, Err: errors.New("not a directory")}
	}
	n := 0
	for {
		entries, err := d.ReadDir(1024)
		n += len(entries)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// countFDs counts a process's open files. Since Linux 6.2 the size of a
// /proc/PID/fd directory is its number of open files (commit f1f1f2569901),
// one stat instead of reading up to a million names; older kernels report
// 0 there, and then the names are counted.
func (p Proc) countFDs(dir string) (int, error) {
	if p.FDCountInSize {
		if fi, err := fs.Stat(p.FS, dir); err == nil && fi.Size() > 0 {
			return int(fi.Size()), nil
		}
	}
	return countDir(p.FS, dir)
}
