package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	vnetns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Create makes a named network namespace as `ip netns add NAME` does: a
// new namespace bind-mounted on /run/netns/NAME, which keeps it alive
// with no process inside. It starts empty: lo exists but is down.
//
// The namespace is made by unshare(2) on a locked thread, which is then
// put back into its own namespace before it is unlocked, for the reason
// Do gives; if that fails the thread ends with its goroutine.
func Create(name string) (NS, error) {
	if err := checkName(name); err != nil {
		return NS{}, err
	}
	path := filepath.Join(runDirs[0], name)
	if _, err := os.Lstat(path); err == nil {
		return NS{}, fmt.Errorf("create netns %s: %w", name, fs.ErrExist)
	}
	if err := shareRunDir(); err != nil {
		return NS{}, err
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer unix.Close(back)
		h, err := vnetns.NewNamed(name)
		if err == nil {
			h.Close() // the bind mount holds the namespace
		}
		if unix.Setns(back, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	if err := <-errc; err != nil {
		// NewNamed creates the file before it mounts onto it: a failed
		// mount leaves an empty file that would block the next Create.
		if !errors.Is(err, fs.ErrExist) {
			os.Remove(path)
		}
		return NS{}, fmt.Errorf("create netns %s: %w", name, err)
	}
	return Resolve(name)
}

// shareRunDir makes /run/netns a mount point with shared propagation, as
// `ip netns add` does. `ip netns exec` runs its command in a copy of the
// mount table; only through a shared /run/netns does Delete's unmount
// reach that copy too, so that a deleted namespace does not live on in
// it.
func shareRunDir() error {
	dir := runDirs[0]
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	err := unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	if errors.Is(err, unix.EINVAL) {
		// Not a mount point yet: make it one, bound onto itself.
		if err := unix.Mount(dir, dir, "none", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s onto itself: %w", dir, err)
		}
		err = unix.Mount("", dir, "none", unix.MS_SHARED|unix.MS_REC, "")
	}
	if err != nil {
		return fmt.Errorf("share %s: %w", dir, err)
	}
	return nil
}

// Delete removes a named namespace as `ip netns del NAME` does: its bind
// mount and file go, and the namespace ends (taking its links, addresses,
// routes, qdiscs and nftables tables with it) once no process is left
// inside. A missing name is ErrNotFound.
func Delete(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	err := vnetns.DeleteNamed(name)
	switch {
	case errors.Is(err, unix.ENOENT):
		return fmt.Errorf("%w: %s", ErrNotFound, name)
	case errors.Is(err, unix.EINVAL):
		// A file without its mount (a Create that failed halfway): `ip
		// netns del` ignores the unmount's failure and removes it too.
		err = os.Remove(filepath.Join(runDirs[0], name))
	}
	if err != nil {
		return fmt.Errorf("delete netns %s: %w", name, err)
	}
	return nil
}

// List returns the names of the namespaces in /run/netns, sorted, as
// `ip netns list` shows them; none when the directory does not exist.
func List() ([]string, error) {
	ents, err := os.ReadDir(runDirs[0])
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list netns: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names, nil
}

// PIDs returns, sorted, the processes whose /proc/PID/ns/net is the
// namespace n, compared by inode, as `ip netns pids` lists them. Processes
// that end while it looks, or whose namespace it may not see, are left
// out.
func PIDs(n NS) ([]int, error) {
	ino := n.Inode
	if ino == 0 {
		path := n.Path
		if n.Own() {
			path = "/proc/self/ns/net"
		}
		var err error
		if ino, err = Inode(path); err != nil {
			return nil, err
		}
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/net", &st) == nil && st.Ino == ino {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids, nil
}

// checkName refuses names that are not one file in /run/netns.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') {
		return fmt.Errorf("invalid netns name %q", name)
	}
	return nil
}
