package tune

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// initNetNS finds the initial network namespace, where host-wide
// settings are writable. PID 1's may be closed to us (a sandbox's init),
// so it is the first namespace, from this process up its parents and
// then across /proc, that has the settings only the initial namespace
// registers (net.core.netdev_max_backlog; a child namespace sees
// rmem_max read-only). "" is this process's own.
func initNetNS() (string, error) {
	isInit := func(path string) bool {
		ok := false
		netns.NS{Path: path}.Do(func() error {
			_, err := os.Stat("/proc/sys/net/core/netdev_max_backlog")
			ok = err == nil
			return nil
		})
		return ok
	}
	if isInit("") {
		return "", nil
	}
	for pid := os.Getppid(); pid > 1; {
		p := fmt.Sprintf("/proc/%d/ns/net", pid)
		if isInit(p) {
			return p, nil
		}
		st, err := procfs.Stat(strconv.Itoa(pid))
		if err != nil {
			break
		}
		pid = st.PPID
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err == nil {
			if p := "/proc/" + e.Name() + "/ns/net"; isInit(p) {
				return p, nil
			}
		}
	}
	return "", errors.New("cannot find the initial network namespace to write host-wide settings in: run netdoctor from it, or leave host-wide settings out of the plan")
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

func sysctlPath(name string) string {
	return "/proc/sys/" + strings.ReplaceAll(name, ".", "/")
}

// Sysctl reads a setting inside the scope's namespace.
func (Live) Sysctl(s Scope, name string) (string, error) {
	p, err := s.path()
	if err != nil {
		return "", err
	}
	return readSysctl(p, name)
}

// readSysctl reads a setting inside the namespace at path ("" for this
// one): /proc/sys/net follows the reading thread's namespace.
func readSysctl(path, name string) (string, error) {
	var v []byte
	err := netns.NS{Path: path}.Do(func() error {
		var err error
		v, err = os.ReadFile(sysctlPath(name))
		return err
	})
	return normalize(string(v)), err
}

// writeSysctl writes a setting inside the namespace at path and reads it
// back: the kernel may refuse a value or round it without an error.
func writeSysctl(path, name, value string) error {
	return netns.NS{Path: path}.Do(func() error {
		f, err := os.OpenFile(sysctlPath(name), os.O_WRONLY, 0)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s: this kernel or namespace does not have it", name)
		}
		if err != nil {
			return err
		}
		_, err = f.WriteString(value)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s = %q: %w", name, value, err)
		}
		b, err := os.ReadFile(sysctlPath(name))
		if err == nil && normalize(string(b)) != normalize(value) {
			err = fmt.Errorf("%s reads %q after writing %q", name, normalize(string(b)), value)
		}
		return err
	})
}

func (Live) ReadFile(path string) ([]byte, error) { return os.ReadFile(path) }

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
	return Proc{Exe: strings.TrimSuffix(exe, " (deleted)"), Cmdline: string(cmd), Start: st.StartTime, Comm: st.Comm, Cwd: cwd, UID: uid}, nil
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
