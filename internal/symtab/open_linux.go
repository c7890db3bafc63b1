package symtab

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openMapped opens, read-only, the file behind mapping m of process pid.
//
// First through /proc/PID/map_files/START-END: the kernel's reference
// to the very file mapped, whatever its path says now. Without it (no
// CAP_SYS_ADMIN), by the mapping's path, without following a symbolic
// link at its end and only if that file is the one mapped (same device
// and inode). Either way the file is first opened with O_PATH, which
// opens nothing (no device driver's open, no FIFO that blocks): only a
// regular file is then reopened for reading, through /proc/self/fd.
func openMapped(proc string, pid int, m Mapping) (*os.File, error) {
	name := fmt.Sprintf("%s/%d/map_files/%x-%x", proc, pid, m.Start, m.End)
	fd, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0)
	byPath := false
	if err != nil {
		if !m.File() || m.Deleted {
			return nil, fmt.Errorf("open %s: %w", name, err)
		}
		name, byPath = m.Path, true
		if fd, err = unix.Open(m.Path, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("open %s: %w", m.Path, err)
		}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	if byPath && (st.Ino != m.Inode || unix.Major(st.Dev) != m.Major || unix.Minor(st.Dev) != m.Minor) {
		return nil, fmt.Errorf("%s: not the file mapped (device or inode differ): replaced since", name)
	}
	return reopen(fd, name)
}

// OpenExe opens, read-only, process pid's executable through
// /proc/PID/exe (the kernel's reference to the file it runs); only a
// regular file is opened for reading.
func OpenExe(proc string, pid int) (*os.File, error) {
	name := proc + "/" + strconv.Itoa(pid) + "/exe"
	fd, err := unix.Open(name, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, fmt.Errorf("%s: not a regular file", name)
	}
	return reopen(fd, name)
}

// reopen opens an O_PATH descriptor's file for reading.
func reopen(fd int, name string) (*os.File, error) {
	rfd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(fd), unix.O_RDONLY|unix.O_CLOEXEC|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	f := os.NewFile(uintptr(rfd), name)
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, errors.Join(fmt.Errorf("%s: not a regular file", name), err)
	}
	return f, nil
}
