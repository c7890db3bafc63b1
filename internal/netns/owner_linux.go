package netns

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// nsGetUserns is NS_GET_USERNS, _IO(0xb7, 0x1) (include/uapi/linux/nsfs.h):
// a descriptor of the user namespace that owns a namespace.
const nsGetUserns = 0xb701

// OwnedByRoot reports whether the namespace at path was created by
// root: its owning user namespace is this process's own (the host's
// initial one, where netdoctor runs as root; PID 1's may not be
// readable). A namespace an unprivileged user made (`unshare -rn`) is
// owned by that user's own user namespace, where the user is root and
// may write what its tables hold (conntrack entries, routes): what root
// infers from them must not be that user's say-so.
func OwnedByRoot(path string) (bool, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("open %s: %w", path, err)
	}
	defer unix.Close(fd)
	ufd, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), nsGetUserns, 0)
	if errno != 0 {
		return false, fmt.Errorf("owner of %s: %w", path, errno)
	}
	defer unix.Close(int(ufd))
	var own, initial unix.Stat_t
	if err := unix.Fstat(int(ufd), &own); err != nil {
		return false, fmt.Errorf("owner of %s: %w", path, err)
	}
	if err := unix.Stat("/proc/thread-self/ns/user", &initial); err != nil {
		return false, fmt.Errorf("own user namespace: %w", err)
	}
	return own.Ino == initial.Ino && own.Dev == initial.Dev, nil
}
