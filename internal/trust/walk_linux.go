package trust

import (
	"errors"
	"io"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"
)

// open resolves abs (absolute, inside Root) one component at a time from
// directory descriptors and opens it: a regular file, or a directory to
// list. Each symlink is read from the descriptor of the directory that
// holds it and followed only when root alone could have made it.
func (f FS) open(abs string) (*os.File, error) {
	root := f.Root
	if root == "" {
		root = "/"
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: root, Err: err}
	}
	w := &walker{mode: f.Mode, stack: []dirent{{fd: rootFd, name: "/"}}}
	defer w.close()
	var st unix.Stat_t
	if err := unix.Fstat(rootFd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: root, Err: err}
	}
	if err := w.dirOK("/", &st); err != nil {
		return nil, err
	}
	w.stack[0].st = st
	return w.walk(abs)
}

type dirent struct {
	fd   int
	name string // the path inside Root, for messages
	st   unix.Stat_t
}

type walker struct {
	mode  Mode
	stack []dirent // the directories walked, Root first
	hops  int
}

func (w *walker) close() {
	for _, d := range w.stack {
		unix.Close(d.fd)
	}
}

func (w *walker) top() *dirent { return &w.stack[len(w.stack)-1] }

func (w *walker) walk(abs string) (*os.File, error) {
	todo := components(abs)
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			if len(w.stack) > 1 {
				unix.Close(w.top().fd)
				w.stack = w.stack[:len(w.stack)-1]
			}
			continue
		}
		dir := w.top()
		name := path.Join(dir.name, c)
		var st unix.Stat_t
		if err := unix.Fstatat(dir.fd, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return nil, &os.PathError{Op: "open", Path: name, Err: err}
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			target, err := w.link(dir, c, name, &st)
			if err != nil {
				return nil, err
			}
			if strings.HasPrefix(target, "/") {
				for len(w.stack) > 1 {
					unix.Close(w.top().fd)
					w.stack = w.stack[:len(w.stack)-1]
				}
			}
			todo = append(components(target), todo...)
			continue
		case unix.S_IFDIR:
			if len(todo) > 0 {
				fd, err := unix.Openat(dir.fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
				if err != nil {
					return nil, &os.PathError{Op: "open", Path: name, Err: err}
				}
				var now unix.Stat_t
				if err := unix.Fstat(fd, &now); err != nil || now.Ino != st.Ino || now.Dev != st.Dev {
					unix.Close(fd)
					return nil, untrusted(name, "changed while being opened")
				}
				if err := w.dirOK(name, &now); err != nil {
					unix.Close(fd)
					return nil, err
				}
				w.stack = append(w.stack, dirent{fd: fd, name: name, st: now})
				continue
			}
		}
		if len(todo) > 0 {
			return nil, &os.PathError{Op: "open", Path: name, Err: unix.ENOTDIR}
		}
		return w.final(dir, c, name, &st)
	}
	// The path named Root itself, or a directory reached by "..".
	d := w.top()
	fd, err := unix.Openat(d.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: d.name, Err: err}
	}
	return os.NewFile(uintptr(fd), d.name), nil
}

// link reads the symlink c of dir, when root alone could have made it:
// dir is root's and writable by no one else, or sticky and the link is
// root's.
func (w *walker) link(dir *dirent, c, name string, st *unix.Stat_t) (string, error) {
	if w.hops++; w.hops > maxHops {
		return "", &os.PathError{Op: "open", Path: name, Err: unix.ELOOP}
	}
	perm := dir.st.Mode & 0o7777
	switch {
	case dir.st.Uid != 0:
		return "", untrusted(name, "is a symlink in a directory of uid %d, not followed", dir.st.Uid)
	case perm&0o022 != 0 && (perm&unix.S_ISVTX == 0 || st.Uid != 0):
		return "", untrusted(name, "is a symlink in a directory others may write (mode %04o), not followed", perm)
	}
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir.fd, c, buf)
	if err != nil {
		return "", &os.PathError{Op: "readlink", Path: name, Err: err}
	}
	return string(buf[:n]), nil
}

// dirOK checks a directory on the way: in Owned mode, root's and writable
// by no one else unless sticky.
func (w *walker) dirOK(name string, st *unix.Stat_t) error {
	if w.mode != Owned {
		return nil
	}
	perm := st.Mode & 0o7777
	switch {
	case st.Uid != 0:
		return untrusted(name, "belongs to uid %d", st.Uid)
	case perm&0o022 != 0 && perm&unix.S_ISVTX == 0:
		return untrusted(name, "may be written by others (mode %04o)", perm)
	}
	return nil
}

// final opens the last component: a regular file or a directory, checked
// by mode before and after the open (O_NONBLOCK: a FIFO swapped in
// meanwhile does not block the open, and is refused by the second check).
func (w *walker) final(dir *dirent, c, name string, st *unix.Stat_t) (*os.File, error) {
	if err := w.fileOK(name, st); err != nil {
		return nil, err
	}
	fd, err := unix.Openat(dir.fd, c, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	var now unix.Stat_t
	if err := unix.Fstat(fd, &now); err != nil || now.Ino != st.Ino || now.Dev != st.Dev {
		unix.Close(fd)
		return nil, untrusted(name, "changed while being opened")
	}
	if err := w.fileOK(name, &now); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

func (w *walker) fileOK(name string, st *unix.Stat_t) error {
	typ := st.Mode & unix.S_IFMT
	switch {
	case typ == unix.S_IFDIR:
		return w.dirOK(name, st)
	case typ != unix.S_IFREG:
		return untrusted(name, "is not a regular file (%s)", typeName(typ))
	}
	perm := st.Mode & 0o7777
	switch w.mode {
	case Owned:
		switch {
		case st.Uid != 0:
			return untrusted(name, "belongs to uid %d", st.Uid)
		case perm&0o022 != 0:
			return untrusted(name, "may be written by others (mode %04o)", perm)
		}
	case Written:
		if st.Nlink != 1 {
			return untrusted(name, "has %d links (a hard link may be another file)", st.Nlink)
		}
	}
	return nil
}

func typeName(typ uint32) string {
	switch typ {
	case unix.S_IFIFO:
		return "a FIFO"
	case unix.S_IFCHR:
		return "a character device"
	case unix.S_IFBLK:
		return "a block device"
	case unix.S_IFSOCK:
		return "a socket"
	case unix.S_IFLNK:
		return "a symlink"
	}
	return "unknown type"
}

// readSmall reads a /proc file.
func readSmall(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// Exe is the binary pid runs, for running it as root: pid runs as root
// (Process), in this host's root, and its binary (/proc/PID/exe) is
// still the file at its path, which is Owned. The returned path is the
// one to run.
func Exe(proc string, pid int) (string, error) {
	if err := Process(proc, pid); err != nil {
		return "", err
	}
	link := path.Join(proc, itoa(pid), "exe")
	exe, err := os.Readlink(link)
	if err != nil {
		return "", err
	}
	if strings.HasSuffix(exe, " (deleted)") {
		return "", errors.New(exe + ": deleted since the process started (an upgrade?)")
	}
	f, err := FS{Root: "/", Mode: Owned}.open(exe)
	if err != nil {
		return "", err
	}
	defer f.Close()
	onDisk, err1 := f.Stat()
	running, err2 := os.Stat(link)
	if err := errors.Join(err1, err2); err != nil {
		return "", err
	}
	if !os.SameFile(onDisk, running) {
		return "", untrusted(exe, "is not the binary pid %d runs any more", pid)
	}
	return exe, nil
}

// OpenExe opens the binary pid runs, through its own root, when it is
// Owned there: for reading it (nginx's build options), never running.
func OpenExe(proc string, pid int) (*os.File, error) {
	fsys, err := ProcessFS(proc, pid, Owned)
	if err != nil {
		return nil, err
	}
	link := path.Join(proc, itoa(pid), "exe")
	exe, err := os.Readlink(link)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(exe, " (deleted)") {
		return nil, errors.New(exe + ": deleted since the process started (an upgrade?)")
	}
	f, err := fsys.open(exe)
	if err != nil {
		return nil, err
	}
	onDisk, err1 := f.Stat()
	running, err2 := os.Stat(link)
	if err := errors.Join(err1, err2); err != nil || !os.SameFile(onDisk, running) {
		f.Close()
		if err == nil {
			err = untrusted(exe, "is not the binary pid %d runs any more", pid)
		}
		return nil, err
	}
	return f, nil
}
