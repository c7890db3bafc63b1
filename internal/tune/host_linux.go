package tune

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/capped"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/nginx"
	"github.com/netdoctor/netdoctor/internal/phpfpm"
	"github.com/netdoctor/netdoctor/internal/procnet"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// procfs is the host's /proc (apply runs in the host's PID namespace).
var procfs = procnet.Proc{FS: os.DirFS("/proc")}

// initNetNS is the path of the initial network namespace, where host-wide
// settings are writable (netns.Initial); "" is this process's own.
func initNetNS() (string, error) {
	ns, err := netns.Initial()
	if err != nil {
		return "", fmt.Errorf("%w to write host-wide settings in: run netdoctor from it, or leave host-wide settings out of the plan", err)
	}
	return ns.Path, nil
}

// Live is the running host.
type Live struct{}

// path resolves a scope to the namespace file netns.Do enters.
func (s Scope) path() (string, error) {
	switch {
	case s.Global:
		return initNetNS()
	case s.NetNS != "":
		ns, err := netns.Resolve(s.NetNS)
		return ns.Path, err
	}
	return "", nil
}

// check verifies that the scope's namespace is the one the plan was
// made for.
func (s Scope) check() error {
	if s.Global || s.NetNSInode == 0 {
		return nil
	}
	p, err := s.path()
	if err != nil {
		return err
	}
	ino, err := netnsInode(p)
	if err != nil {
		return err
	}
	if ino != s.NetNSInode {
		return fmt.Errorf("%s is namespace inode %d, the plan was made for %d: pass --netns", s, ino, s.NetNSInode)
	}
	return nil
}

// Sysctl reads a setting inside the scope's namespace.
func (Live) Sysctl(s Scope, name string) (string, error) {
	p, err := s.path()
	if err != nil {
		return "", err
	}
	return sysctl.Read(netns.NS{Path: p}, name)
}

// ReadFile reads a configuration file a report names, to plan an edit
// of it: a report is data anyone may have written, so only a file that
// a running nginx or php-fpm master reads, one apply would accept
// (findMaster: root's master, root's files), is read, never another
// that the report names (/etc/shadow's content would end in the plan).
func (Live) ReadFile(path string) ([]byte, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var why error
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		_, isNginx := nginx.ParseMaster(string(cmd))
		_, isFPM := phpfpm.ParseMaster(string(cmd))
		if !isNginx && !isFPM {
			continue
		}
		pr, err := Live{}.Process(pid)
		if err != nil {
			continue
		}
		m, err := findMaster(pid, pr.Start)
		if err != nil {
			why = err
			continue
		}
		if slices.Contains(m.files, path) {
			f, err := rootFS.Open(strings.TrimPrefix(filepath.Clean(path), "/"))
			if err != nil {
				return nil, err
			}
			defer f.Close()
			return io.ReadAll(capped.Reader(f, capped.Plan, path))
		}
	}
	if why != nil {
		return nil, fmt.Errorf("not a file a running nginx or php-fpm master that netdoctor may change reads (%v)", why)
	}
	return nil, errors.New("not a file a running nginx or php-fpm master reads")
}

// Process reads what a reload needs of a process.
func (Live) Process(pid int) (Proc, error) {
	dir := strconv.Itoa(pid)
	st, err := procfs.Stat(dir)
	if err != nil {
		return Proc{}, err
	}
	exe, err := os.Readlink("/proc/" + dir + "/exe")
	if err != nil {
		return Proc{}, err
	}
	cmd, _ := os.ReadFile("/proc/" + dir + "/cmdline")
	cwd, _ := os.Readlink("/proc/" + dir + "/cwd")
	uid := -1
	if fi, err := os.Stat("/proc/" + dir); err == nil {
		uid = int(fi.Sys().(*syscall.Stat_t).Uid)
	}
	return Proc{Exe: strings.TrimSuffix(exe, " (deleted)"), Cmdline: string(cmd), Start: st.StartTime, Comm: st.Comm, Cwd: cwd, UID: uid, Runtime: app.DetectRuntime(pid)}, nil
}

// MemAvailable is /proc/meminfo's MemAvailable.
func (Live) MemAvailable() uint64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}
