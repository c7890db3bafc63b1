package app

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// procInfo is what discovery reads of one process.
type procInfo struct {
	pid, ppid int
	comm      string
	cmdline   string // NULs turned into spaces, trailing ones trimmed
	exe, cwd  string
}

func readProc(proc string, pid int) (procInfo, bool) {
	st, err := procnet.Proc{FS: os.DirFS(proc)}.Stat(strconv.Itoa(pid))
	if err != nil {
		return procInfo{pid: pid}, false
	}
	dir := filepath.Join(proc, strconv.Itoa(pid))
	p := procInfo{pid: pid, ppid: st.PPID, comm: st.Comm}
	cl, _ := os.ReadFile(dir + "/cmdline")
	p.cmdline = strings.TrimRight(strings.ReplaceAll(string(cl), "\x00", " "), " ")
	p.exe, _ = os.Readlink(dir + "/exe")
	p.cwd, _ = os.Readlink(dir + "/cwd")
	return p, true
}

// Children lists a process's children (a master's workers).
func Children(pid int) []int { return children("/proc", pid) }

// children lists a process's children (CONFIG_PROC_CHILDREN), falling
// back to a scan of /proc for their parent PID.
func children(proc string, pid int) []int {
	p := strconv.Itoa(pid)
	if b, err := os.ReadFile(filepath.Join(proc, p, "task", p, "children")); err == nil {
		var out []int
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
		return out
	}
	ents, _ := os.ReadDir(proc)
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pi, ok := readProc(proc, n); ok && pi.ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

// kindOf names the server a process is, from its command name.
func kindOf(comm string) string {
	switch {
	case comm == "nginx":
		return "nginx"
	case strings.HasPrefix(comm, "php-fpm"):
		return "php-fpm"
	}
	return comm
}
