package app

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// localPort returns the local port of socket fd in process pid, by
// taking a copy of the descriptor (pidfd_getfd, Linux 5.6+, needs ptrace
// rights over pid: root) and asking it. ok is false for anything that is
// not an inet socket, or when the copy is refused.
func localPort(pid, fd int) (int, bool) {
	c, err := copyFD(pid, fd)
	if err != nil {
		return 0, false
	}
	defer unix.Close(c)
	sa, err := unix.Getsockname(c)
	if err != nil {
		return 0, false
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port, true
	case *unix.SockaddrInet6:
		return a.Port, true
	}
	return 0, false
}

// copyFD returns a copy of descriptor fd of process pid, to be closed
// by the caller.
func copyFD(pid, fd int) (int, error) {
	pfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return -1, err
	}
	defer unix.Close(pfd)
	return unix.PidfdGetfd(pfd, fd, 0)
}

// isRead reports whether a system call number reads from a descriptor.
func isRead(nr int) bool {
	switch uintptr(nr) {
	case unix.SYS_READ, unix.SYS_PREAD64, unix.SYS_READV, unix.SYS_RECVFROM, unix.SYS_RECVMSG:
		return true
	}
	return false
}

// peerPort returns the remote port of socket fd in process pid and
// whether it is a datagram socket, by a copy of the descriptor as
// localPort takes one.
func peerPort(pid, fd int) (port int, udp, ok bool) {
	c, err := copyFD(pid, fd)
	if err != nil {
		return 0, false, false
	}
	defer unix.Close(c)
	typ, err := unix.GetsockoptInt(c, unix.SOL_SOCKET, unix.SO_TYPE)
	if err != nil {
		return 0, false, false
	}
	sa, err := unix.Getpeername(c)
	if err != nil {
		return 0, false, false
	}
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return a.Port, typ == unix.SOCK_DGRAM, true
	case *unix.SockaddrInet6:
		return a.Port, typ == unix.SOCK_DGRAM, true
	}
	return 0, false, false
}

// isPoll reports whether a system call number is poll or ppoll.
func isPoll(nr int) bool {
	switch uintptr(nr) {
	case unix.SYS_PPOLL:
		return true
	}
	return isPollLegacy(nr)
}

// peerAddr is the remote address of socket fd of process pid, "" when
// it is no connected inet socket.
func peerAddr(pid, fd int) string {
	c, err := copyFD(pid, fd)
	if err != nil {
		return ""
	}
	defer unix.Close(c)
	sa, err := unix.Getpeername(c)
	if err != nil {
		return ""
	}
	if ap := addrPort(sa); ap.IsValid() {
		return ap.String()
	}
	return ""
}

// syscallNames are the system calls a blocked thread is most often in,
// by number; syscallName falls back to the number.
var syscallNames = map[uintptr]string{
	unix.SYS_READ: "read", unix.SYS_READV: "readv", unix.SYS_PREAD64: "pread64", unix.SYS_RECVFROM: "recvfrom",
	unix.SYS_RECVMSG: "recvmsg", unix.SYS_WRITE: "write", unix.SYS_SENDTO: "sendto", unix.SYS_SENDMSG: "sendmsg",
	unix.SYS_FUTEX: "futex", unix.SYS_EPOLL_PWAIT: "epoll_pwait", unix.SYS_PPOLL: "ppoll", unix.SYS_PSELECT6: "pselect6",
	unix.SYS_NANOSLEEP: "nanosleep", unix.SYS_CLOCK_NANOSLEEP: "clock_nanosleep", unix.SYS_ACCEPT: "accept",
	unix.SYS_ACCEPT4: "accept4", unix.SYS_CONNECT: "connect", unix.SYS_FLOCK: "flock", unix.SYS_FCNTL: "fcntl",
	unix.SYS_WAIT4: "wait4",
}

// syscallName names a system call number ("syscall 7" when it is none
// of syscallNames).
func syscallName(nr int) string {
	if n, ok := syscallNames[uintptr(nr)]; ok {
		return n
	}
	if n, ok := legacySyscalls[uintptr(nr)]; ok {
		return n
	}
	return "syscall " + strconv.Itoa(nr)
}

// isAccept reports whether system call nr takes a connection off a
// listening socket.
func isAccept(nr int) bool {
	return uintptr(nr) == unix.SYS_ACCEPT || uintptr(nr) == unix.SYS_ACCEPT4
}
