package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"

	"golang.org/x/sys/unix"
)

// ErrNotFound reports a namespace name or path that does not exist or is
// not a network namespace.
var ErrNotFound = errors.New("no such network namespace")

// ErrPermission reports that entering a namespace needs privileges the
// process lacks (CAP_SYS_ADMIN, in practice root).
var ErrPermission = errors.New("entering a network namespace needs root (CAP_SYS_ADMIN)")

// Resolve checks that a namespace, given as `ip netns` knows it (a name
// under /run/netns) or by path (/proc/PID/ns/net, a bind mount), exists
// and is a network namespace, and reads its inode. "" is the caller's
// own namespace.
func Resolve(nameOrPath string) (NS, error) {
	n := Parse(nameOrPath)
	if n.Own() {
		ino, err := Inode("/proc/self/ns/net")
		n.Inode = ino
		return n, err
	}
	fd, err := unix.Open(n.Path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return NS{}, fmt.Errorf("%w: %s (not in /run/netns, see `ip netns list`)", ErrNotFound, nameOrPath)
		}
		return NS{}, openErr(n.Path, err)
	}
	defer unix.Close(fd)
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil || typ != unix.CLONE_NEWNET {
		return NS{}, fmt.Errorf("%w: %s is not a network namespace file", ErrNotFound, n.Path)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return NS{}, fmt.Errorf("stat netns %s: %w", n.Path, err)
	}
	n.Inode = st.Ino
	return n, nil
}

// openErr says why a namespace file could not be opened: another
// process's namespace (/proc/PID/ns/net) is open to root only (EACCES),
// which is ErrPermission as a refused setns is.
func openErr(path string, err error) error {
	if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) {
		return fmt.Errorf("%w: open %s: %v", ErrPermission, path, err)
	}
	return fmt.Errorf("open netns %s: %w", path, err)
}

// Inode returns the namespace's inode number, the id the kernel prints
// (e.g. "table full in netns 4026532246") and /proc/PID/ns/net links to.
// An empty path means the calling thread's namespace.
func Inode(path string) (uint64, error) {
	if path == "" {
		path = "/proc/thread-self/ns/net"
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, fmt.Errorf("stat netns %s: %w", path, err)
	}
	return st.Ino, nil
}

// Do runs fn on an OS thread inside the namespace and waits for it. In
// the caller's own namespace fn runs on a locked thread too. The thread returns to its own
// namespace afterwards: were it left behind, and were it the main thread,
// /proc/PID/ns/net would name the other namespace for the whole process
// (and `ip netns pids` would count the process as one of its own).
func (n NS) Do(fn func() error) error { return do(n.Path, fn) }

func do(path string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if path == "" {
			errc <- fn()
			runtime.UnlockOSThread()
			return
		}
		back, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("open own netns: %w", err)
			return
		}
		defer unix.Close(back)
		if err := enter(path); err != nil {
			runtime.UnlockOSThread() // setns failed: still at home
			errc <- err
			return
		}
		err = fn()
		// Back to the original namespace, so that the thread may be
		// reused. If that fails the goroutine exits still locked and
		// the runtime ends the thread instead (or, for the main thread,
		// parks it for good), so no other goroutine runs in the wrong
		// namespace.
		if unix.Setns(back, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

func enter(path string) error {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("%w: %s", ErrNotFound, path)
		}
		return openErr(path, err)
	}
	defer unix.Close(fd)
	if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("%w: setns %s: %v", ErrPermission, path, err)
		}
		return fmt.Errorf("setns %s: %w", path, err)
	}
	return nil
}

// Dial connects from inside the namespace. A socket belongs to the namespace it was created in, so only
// the dial needs the namespace's thread; the connection may then be used
// from anywhere. (An http.Transport dials on goroutines of its own, which
// is why wrapping a whole request in Do is not enough.)
func (n NS) Dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.Do(func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
