package netns

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// ErrNoInitial reports that no process this one can see is in the
// initial network namespace.
var ErrNoInitial = errors.New("cannot find the initial network namespace")

// procfs is the host's /proc: netdoctor runs in the host's PID namespace.
var procfs = procnet.Proc{FS: os.DirFS("/proc")}

// Initial finds the initial network namespace, where host-wide settings
// (net.netfilter.nf_conntrack_max, fs.*, net.core.rmem_max…) live and are
// writable. PID 1's may be closed to us (a sandbox's init), so it is the
// first namespace, from this process up its parents and then across
// /proc, that has a setting only the initial namespace registers
// (net.core.netdev_max_backlog; a child namespace sees rmem_max
// read-only). It is the caller's own namespace (NS.Own) when that is
// the initial one.
func Initial() (NS, error) {
	if isInitial("") {
		return Resolve("")
	}
	for pid := os.Getppid(); pid > 1; {
		p := fmt.Sprintf("/proc/%d/ns/net", pid)
		if isInitial(p) {
			return Resolve(p)
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
			if p := "/proc/" + e.Name() + "/ns/net"; isInitial(p) {
				return Resolve(p)
			}
		}
	}
	return NS{}, ErrNoInitial
}

// isInitial reports whether the namespace at path ("" for this one) is
// the initial one.
func isInitial(path string) bool {
	ok := false
	NS{Path: path}.Do(func() error {
		_, err := os.Stat("/proc/sys/net/core/netdev_max_backlog")
		ok = err == nil
		return nil
	})
	return ok
}
