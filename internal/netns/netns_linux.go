package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrNotFound reports a namespace name or path that does not exist or is
// not a network namespace.
var ErrNotFound = errors.New("no such network namespace")

// ErrPermission reports that entering a namespace needs privileges the
// process lacks (CAP_SYS_ADMIN, in practice root).
var ErrPermission = errors.New("entering a network namespace needs root (CAP_SYS_ADMIN)")

// Resolve turns a name as `ip netns` knows it (a file under /run/netns) or
// a path (/proc/PID/ns/net, a bind mount) into a path, and checks that it
// is a network namespace. "" stays "", meaning the caller's own namespace.
func Resolve(nameOrPath string) (string, error) {
	if nameOrPath == "" {
		return "", nil
	}
	path := nameOrPath
	if !strings.ContainsRune(nameOrPath, '/') {
		path = filepath.Join("/run/netns", nameOrPath)
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return "", fmt.Errorf("%w: %s (not in /run/netns, see `ip netns list`)", ErrNotFound, nameOrPath)
		}
		return "", fmt.Errorf("open netns %s: %w", path, err)
	}
	defer unix.Close(fd)
	typ, err := unix.IoctlRetInt(fd, unix.NS_GET_NSTYPE)
	if err != nil || typ != unix.CLONE_NEWNET {
		return "", fmt.Errorf("%w: %s is not a network namespace file", ErrNotFound, path)
	}
	return path, nil
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

// Do runs fn on an OS thread inside the network namespace at path, as
// returned by Resolve, and waits for it. With an empty path fn runs on a
// locked thread in the current namespace. The thread returns to its own
// namespace afterwards: were it left behind, and were it the main thread,
// /proc/PID/ns/net would name the other namespace for the whole process
// (and `ip netns pids` would count the process as one of its own).
func Do(path string, fn func() error) error {
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
		return fmt.Errorf("open netns %s: %w", path, err)
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

// DialContext connects from inside the namespace at path ("" for the
// caller's). A socket belongs to the namespace it was created in, so only
// the dial needs the namespace's thread; the connection may then be used
// from anywhere. (An http.Transport dials on goroutines of its own, which
// is why wrapping a whole request in Do is not enough.)
func DialContext(ctx context.Context, path, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := Do(path, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}
