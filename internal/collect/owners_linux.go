package collect

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// scanFDs reads the links in one /proc/PID/fd directory and returns those
// naming a socket in need; with limit > 0, only the first limit entries,
// which procfs lists in descriptor order. readlinkat on the open directory avoids a path
// walk per descriptor.
func scanFDs(dir string, pid int, need map[uint64]bool, limit int) []inodeRef {
	d, err := os.Open(dir)
	if err != nil {
		return nil // exited, or not ours to read
	}
	defer d.Close()
	dfd := int(d.Fd())
	var out []inodeRef
	buf := make([]byte, 64)
	const prefix = "socket:["
	for read := 0; limit <= 0 || read < limit; {
		names, err := d.Readdirnames(batch(limit))
		read += len(names)
		for _, name := range names {
			n, err := unix.Readlinkat(dfd, name, buf)
			if err != nil || n < len(prefix)+2 || string(buf[:len(prefix)]) != prefix {
				continue
			}
			ino, err := strconv.ParseUint(string(buf[len(prefix):n-1]), 10, 64)
			if err != nil || !need[ino] {
				continue
			}
			fd, _ := strconv.Atoi(name)
			out = append(out, inodeRef{ownerRef{pid: pid, fd: fd}, ino})
		}
		if err != nil || len(names) == 0 {
			break
		}
	}
	return out
}

// batch is how many names to read at once: no more than a limited scan
// needs.
func batch(limit int) int {
	if limit > 0 && limit < 1024 {
		return limit
	}
	return 1024
}
