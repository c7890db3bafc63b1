package app

import (
	"errors"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// listFDs calls fn with each descriptor number of /proc/PID/fd (dir)
// from from on, in increasing order, until fn returns false or the
// table ends; end says it ended. buf is the getdents buffer, reused
// between calls.
//
// It seeks instead of reading the directory whole: procfs numbers the
// directory's positions by descriptor (position fd+2, after "." and
// ".."; proc_readfd_common), so a walk of 4096 descriptors from the
// middle of a proxy's 16 000 pays for those 4096, and a walk that stops
// early (the traced connections' places all taken) pays for the few it
// read. Each entry read costs the kernel a dentry (proc_fill_cache):
// listing all 10 000 descriptors of a process took ~7 ms, as much as
// a whole burst's lookups. Descriptors below from that a kernel
// numbering positions otherwise would return are left out.
func listFDs(dir string, from int, buf []byte, fn func(fd int) bool) (end bool, err error) {
	d, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, err
	}
	defer unix.Close(d)
	if from > 0 {
		if _, err := unix.Seek(d, int64(from)+2, 0); err != nil {
			return false, err
		}
	}
	var names []string
	for {
		n, err := unix.Getdents(d, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return false, err
		}
		if n <= 0 {
			return true, nil
		}
		_, _, names = syscall.ParseDirent(buf[:n], -1, names[:0])
		for _, name := range names {
			fd, err := strconv.Atoi(name)
			if err != nil || fd < from {
				continue
			}
			if !fn(fd) {
				return false, nil
			}
		}
	}
}
