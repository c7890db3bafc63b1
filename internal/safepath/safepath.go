package safepath

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotPrivate is wrapped by the errors of a path that another user
// owns or could have replaced.
var ErrNotPrivate = errors.New("not private")

// PrivateDir makes dir, mode 0700, and its missing parents the same way,
// or checks the one there: a directory, not a symlink, owned by the
// caller; one of the caller's left open to others is closed (0700).
// Every existing parent must be one that only root or the caller can
// change, or a sticky directory (/tmp), where others cannot remove or
// rename what the caller made. A path another user has taken returns an
// error wrapping ErrNotPrivate, and nothing is created through it.
func PrivateDir(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := trustedParents(dir); err != nil {
		return err
	}
	err = os.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrNotExist) && filepath.Dir(dir) != dir {
		if err := PrivateDir(filepath.Dir(dir)); err != nil {
			return err
		}
		err = os.Mkdir(dir, 0o700)
	}
	if err == nil || !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w", dir, ErrNotPrivate)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory: %w", dir, ErrNotPrivate)
	case owner(fi) != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d: %w", dir, owner(fi), ErrNotPrivate)
	case fi.Mode().Perm()&0o077 != 0:
		return os.Chmod(dir, 0o700)
	}
	return nil
}

// trustedParents checks every existing parent of an absolute path: owned
// by root or the caller, and writable by no one else unless sticky. A
// symlink among them must be root's or the caller's, and lead to such a
// directory.
func trustedParents(path string) error {
	for p := filepath.Dir(path); ; p = filepath.Dir(p) {
		fi, err := os.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return err
		default:
			if err := trusted(p, fi); err != nil {
				return err
			}
		}
		if filepath.Dir(p) == p {
			return nil
		}
	}
}

func trusted(p string, fi fs.FileInfo) error {
	if o := owner(fi); o != 0 && o != os.Geteuid() {
		return fmt.Errorf("%s belongs to uid %d: %w", p, o, ErrNotPrivate)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		target, err := os.Stat(p)
		if err != nil {
			return err
		}
		return trusted(p, target)
	}
	if fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("%s may be written by others (mode %v): %w", p, fi.Mode().Perm(), ErrNotPrivate)
	}
	return nil
}

// File is a file being written by Create; Close makes it visible at
// its path, Abort drops it.
type File struct {
	f *os.File
	// tmp is the temporary file written instead, renamed over path on
	// Close, when path is another user's file.
	tmp, path string
}

// Create opens path to write what a user asked for (a report, a bundle, a
// plan), as root may be asked to in a directory others write (/tmp). It
// writes regular files only, mode 0600 when it makes them, and never
// blocks: a FIFO, a device or a socket at path is refused (stdout is "-"
// to the commands), whatever opened in its place between the checks is
// refused too. A new file is created exclusively, without following a
// symlink made meanwhile. An existing symlink is followed only when it is
// root's or the caller's, to a file these rules allow; another user's is
// refused with an error wrapping ErrNotPrivate. Another user's regular
// file, or one with other hard links (another name of the same file,
// maybe one of root's), is replaced on Close, never written into. The
// caller's own file with one link is written over.
func Create(path string) (*File, error) {
	return create(path, 0)
}

func create(path string, hops int) (*File, error) {
	const flags = os.O_WRONLY | syscall.O_CLOEXEC | syscall.O_NONBLOCK | syscall.O_NOCTTY
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(path, flags|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
		if err != nil {
			return nil, err
		}
		return &File{f: f}, nil
	case err != nil:
		return nil, err
	case fi.Mode()&fs.ModeSymlink != 0:
		if o := owner(fi); o != 0 && o != os.Geteuid() {
			return nil, fmt.Errorf("%s is a symlink of uid %d, not followed: %w", path, o, ErrNotPrivate)
		}
		if hops >= 8 {
			return nil, fmt.Errorf("%s: too many symlinks", path)
		}
		target, err := os.Readlink(path)
		if err != nil {
			return nil, err
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(path), target)
		}
		return create(target, hops+1)
	case !fi.Mode().IsRegular():
		return nil, notRegular(path, fi)
	case owner(fi) != os.Geteuid() || links(fi) > 1:
		return replacement(path)
	}
	f, err := os.OpenFile(path, flags|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, err
	}
	// Checked on what was opened: the name may have been replaced since
	// the Lstat (O_NONBLOCK: by a FIFO, the open did not wait for it).
	now, err := f.Stat()
	switch {
	case err != nil:
		f.Close()
		return nil, err
	case !now.Mode().IsRegular():
		f.Close()
		return nil, notRegular(path, now)
	case owner(now) != os.Geteuid() || links(now) > 1 || !os.SameFile(fi, now):
		f.Close()
		return nil, fmt.Errorf("%s changed while being opened: %w", path, ErrNotPrivate)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, err
	}
	return &File{f: f}, nil
}

// notRegular refuses a FIFO, a device, a socket or a directory.
func notRegular(path string, fi fs.FileInfo) error {
	return fmt.Errorf("%s is not a regular file (%v): netdoctor writes files only (\"-\" is stdout): %w", path, fi.Mode().Type(), ErrNotPrivate)
}

// replacement is a temporary file beside path, renamed over it on Close.
func replacement(path string) (*File, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	return &File{f: tmp, tmp: tmp.Name(), path: path}, nil
}

// Write implements io.Writer.
func (f *File) Write(p []byte) (int, error) { return f.f.Write(p) }

// Close closes the file and, when it replaces another user's, renames it
// over theirs. Its error is the write's last chance to fail (a full disk).
func (f *File) Close() error {
	err := f.f.Close()
	if f.tmp == "" {
		return err
	}
	if err == nil {
		err = os.Rename(f.tmp, f.path)
	}
	if err != nil {
		os.Remove(f.tmp)
	}
	return err
}

// Abort closes the file after a failed write: a replacement is removed
// and the file at path left as it was.
func (f *File) Abort() {
	f.f.Close()
	if f.tmp != "" {
		os.Remove(f.tmp)
	}
}

// CheckOwned checks a file netdoctor is about to act on (a journal, whose
// entries say what to write back where): a regular file, not a symlink,
// owned by root or the caller and writable by no one else. An error
// from Lstat is returned unwrapped (callers test fs.ErrNotExist).
func CheckOwned(path string) error {
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	switch o := owner(fi); {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: %w", path, ErrNotPrivate)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%s is not a regular file: %w", path, ErrNotPrivate)
	case o != 0 && o != os.Geteuid():
		return fmt.Errorf("%s belongs to uid %d: %w", path, o, ErrNotPrivate)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s may be written by others (mode %v): %w", path, fi.Mode().Perm(), ErrNotPrivate)
	}
	return nil
}

// CheckConfig checks a configuration netdoctor reads again while it
// runs (the agent's web configuration, on every connection, and the
// certificates it names): CheckOwned, in a directory owned by root or
// the caller that no one else may write, sticky or not (in /tmp, anyone
// may make the file again once it is gone), below directories that only
// root or the caller can change (or sticky ones).
func CheckConfig(path string) error {
	if err := CheckOwned(path); err != nil {
		return err
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return err
	}
	dir := filepath.Dir(abs)
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	switch o := owner(fi); {
	case o != 0 && o != os.Geteuid():
		return fmt.Errorf("%s is in %s, which belongs to uid %d: %w", path, dir, o, ErrNotPrivate)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("%s is in %s, which others may write (mode %v): another user could put a file of theirs in its place: %w", path, dir, fi.Mode().Perm(), ErrNotPrivate)
	}
	return trustedParents(abs)
}

// links is a file's count of hard links (1 when the system does not say).
func links(fi fs.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 1
}

// owner is a file's owner (-1 when the system does not say).
func owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
