package safepath

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the other local user of the tests.
const nobody = 65534

// sharedDir is a directory like /tmp: anyone may create names in it, and
// only their owner may remove or rename them.
func sharedDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes files of another user")
	}
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir
}

// theirs makes a file, directory or symlink as nobody would have.
func theirs(t *testing.T, path string, make func(string) error) {
	t.Helper()
	if err := make(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, nobody, nobody); err != nil {
		t.Fatal(err)
	}
}

func mustEmpty(t *testing.T, dir string) {
	t.Helper()
	if ents, err := os.ReadDir(dir); err != nil || len(ents) > 0 {
		t.Errorf("%s: %v, %v; want it empty", dir, ents, err)
	}
}

// TestPrivateDir: a directory another user made first, or a symlink to
// one, is refused and nothing is made through it; a new one is 0700,
// with its missing parents; one of ours left open is closed.
func TestPrivateDir(t *testing.T) {
	tmp := sharedDir(t)
	target := t.TempDir()

	taken := filepath.Join(tmp, "taken")
	theirs(t, taken, func(p string) error { return os.Mkdir(p, 0o777) })
	if err := PrivateDir(taken); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Errorf("a directory of uid %d: %v, want ErrNotPrivate", nobody, err)
	}
	if err := PrivateDir(filepath.Join(taken, "below")); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("below a directory of uid %d: %v, want ErrNotPrivate", nobody, err)
	}
	mustEmpty(t, taken)

	link := filepath.Join(tmp, "link")
	theirs(t, link, func(p string) error { return os.Symlink(target, p) })
	if err := PrivateDir(link); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a symlink of uid %d: %v, want ErrNotPrivate", nobody, err)
	}
	if err := PrivateDir(filepath.Join(link, "below")); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("below a symlink of uid %d: %v, want ErrNotPrivate", nobody, err)
	}
	mustEmpty(t, target)

	fresh := filepath.Join(tmp, "a", "b")
	if err := PrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fresh, filepath.Dir(fresh)} {
		if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory, 0700", p, fi.Mode(), err)
		}
	}
	if err := os.Chmod(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := PrivateDir(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(fresh); fi.Mode().Perm() != 0o700 {
		t.Errorf("ours left at %v, want closed to 0700", fi.Mode().Perm())
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777) // past the umask; not sticky
	if err := PrivateDir(filepath.Join(open, "d")); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("in a directory anyone may rename in: %v, want ErrNotPrivate", err)
	}
}

// TestCreate: a new file; the caller's own file written over; another
// user's symlink not followed; another user's file replaced, never
// written into; a root symlink (/dev/stdout's kind) followed.
func TestCreate(t *testing.T) {
	tmp := sharedDir(t)
	target := filepath.Join(t.TempDir(), "target")
	if err := os.WriteFile(target, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	write := func(path, data string) error {
		f, err := Create(path)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(f, data); err != nil {
			f.Abort()
			return err
		}
		return f.Close()
	}
	read := func(path string) string {
		b, _ := os.ReadFile(path)
		return string(b)
	}

	fresh := filepath.Join(tmp, "fresh.json")
	if err := write(fresh, "one, longer\n"); err != nil {
		t.Fatal(err)
	}
	if err := write(fresh, "two\n"); err != nil || read(fresh) != "two\n" {
		t.Errorf("our file written again: %v, %q", err, read(fresh))
	}

	link := filepath.Join(tmp, "link.json")
	theirs(t, link, func(p string) error { return os.Symlink(target, p) })
	if err := write(link, "report\n"); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("through a symlink of uid %d: %v, want ErrNotPrivate", nobody, err)
	}
	if read(target) != "root's\n" {
		t.Errorf("written through the symlink: %q", read(target))
	}

	other := filepath.Join(tmp, "other.json")
	theirs(t, other, func(p string) error { return os.WriteFile(p, []byte("theirs\n"), 0o666) })
	hard := filepath.Join(tmp, "hard")
	if err := os.Link(other, hard); err != nil {
		t.Fatal(err)
	}
	if err := write(other, "report\n"); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(other)
	if err != nil || read(other) != "report\n" || fi.Sys().(*syscall.Stat_t).Uid != 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("their file: %q, %v, %v; want ours now, 0600", read(other), fi, err)
	}
	if fi, err := os.Lstat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a new file: %v %v, want 0600", fi.Mode(), err)
	}
	if read(hard) != "theirs\n" {
		t.Errorf("written into their file: %q", read(hard))
	}

	ours := filepath.Join(tmp, "ours")
	if err := os.Symlink(target, ours); err != nil {
		t.Fatal(err)
	}
	if err := write(ours, "through our link\n"); err != nil || read(target) != "through our link\n" {
		t.Errorf("our symlink: %v, target %q", err, read(target))
	}

	if ents, _ := os.ReadDir(tmp); len(ents) != 5 {
		t.Errorf("left in %s: %v", tmp, ents)
	}
}

// TestCreateRegularOnly: a FIFO, a device or a hard link where a report
// goes: the FIFO and the device are refused at once (nothing blocks,
// nothing is written to them), a hard link to root's file is replaced,
// never written into.
func TestCreateRegularOnly(t *testing.T) {
	tmp := sharedDir(t)
	fifo := filepath.Join(tmp, "report.json")
	theirs(t, fifo, func(p string) error { return syscall.Mkfifo(p, 0o666) })
	done := make(chan error, 1)
	go func() {
		f, err := Create(fifo)
		if err == nil {
			f.Abort()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("a FIFO: %v, want a refusal", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Create blocked on a FIFO")
	}
	dev := filepath.Join(tmp, "dev.json")
	if err := os.Symlink("/dev/null", dev); err != nil { // root's link: followed, to a device
		t.Fatal(err)
	}
	if _, err := Create(dev); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a device: %v, want a refusal", err)
	}
	// A hard link to a file of root's (protected_hardlinks off, or
	// root's own): replaced, the other name keeps its content.
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(tmp, "hard.json")
	if err := os.Link(secret, hard); err != nil {
		t.Fatal(err)
	}
	f, err := Create(hard)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "report\n")
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "root's\n" {
		t.Errorf("written through a hard link: %q", b)
	}
	if b, _ := os.ReadFile(hard); string(b) != "report\n" {
		t.Errorf("the report: %q", b)
	}
}

// TestCreateAbort: a failed write leaves the file it would have replaced.
func TestCreateAbort(t *testing.T) {
	tmp := sharedDir(t)
	other := filepath.Join(tmp, "other.json")
	theirs(t, other, func(p string) error { return os.WriteFile(p, []byte("theirs\n"), 0o644) })
	f, err := Create(other)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(f, "half")
	f.Abort()
	if b, _ := os.ReadFile(other); string(b) != "theirs\n" {
		t.Errorf("after Abort: %q", b)
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 1 {
		t.Errorf("left in %s: %v", tmp, ents)
	}
}

// TestCheckOwned: only a regular file of root's or the caller's that no
// one else may write.
func TestCheckOwned(t *testing.T) {
	tmp := sharedDir(t)
	mine := filepath.Join(tmp, "mine.json")
	if err := os.WriteFile(mine, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckOwned(mine); err != nil {
		t.Errorf("our file: %v", err)
	}
	open := filepath.Join(tmp, "open.json")
	os.WriteFile(open, nil, 0o600)
	os.Chmod(open, 0o666)
	link := filepath.Join(tmp, "link.json")
	os.Symlink(mine, link)
	other := filepath.Join(tmp, "other.json")
	theirs(t, other, func(p string) error { return os.WriteFile(p, nil, 0o600) })
	for _, p := range []string{open, link, other} {
		if err := CheckOwned(p); !errors.Is(err, ErrNotPrivate) {
			t.Errorf("%s: %v, want ErrNotPrivate", filepath.Base(p), err)
		}
	}
	if err := CheckOwned(filepath.Join(tmp, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing: %v, want fs.ErrNotExist", err)
	}
}

// TestCheckConfig: a configuration read again later must be in a
// directory no one else writes, sticky or not.
func TestCheckConfig(t *testing.T) {
	tmp := sharedDir(t)
	private := filepath.Join(tmp, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(private, "web.yml")
	os.WriteFile(good, nil, 0o600)
	if err := CheckConfig(good); err != nil {
		t.Errorf("a file of ours in a directory of ours: %v", err)
	}
	shared := filepath.Join(tmp, "web.yml")
	os.WriteFile(shared, nil, 0o600)
	if err := CheckConfig(shared); !errors.Is(err, ErrNotPrivate) || !strings.Contains(err.Error(), "others may write") {
		t.Errorf("a file of ours in a sticky directory others write: %v, want ErrNotPrivate", err)
	}
	open := filepath.Join(private, "open.yml")
	os.WriteFile(open, nil, 0o600)
	os.Chmod(open, 0o666)
	if err := CheckConfig(open); !errors.Is(err, ErrNotPrivate) {
		t.Errorf("a file others may write: %v", err)
	}
}
