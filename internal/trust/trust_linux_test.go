package trust

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

const nobody = 65534

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: files of other users are made with chown")
	}
}

// tree makes, under a private directory, what a local user can leave
// where a process's configuration points.
func tree(t *testing.T) string {
	t.Helper()
	needRoot(t)
	d := t.TempDir()
	mk := func(p, text string, mode os.FileMode, uid int) {
		p = filepath.Join(d, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, uid, uid)
	}
	mkdir := func(p string, mode os.FileMode, uid int) {
		p = filepath.Join(d, p)
		os.MkdirAll(p, mode)
		os.Chmod(p, mode)
		os.Chown(p, uid, uid)
	}
	mk("etc/main.conf", "root's\n", 0o644, 0)
	mk("etc/theirs.conf", "nobody's\n", 0o644, nobody)
	mk("etc/open.conf", "anyone's\n", 0o666, 0)
	mkdir("user", 0o755, nobody)
	mk("user/x.conf", "in nobody's directory\n", 0o644, 0)
	mkdir("open", 0o777, 0)
	mk("open/x.conf", "in a directory anyone writes\n", 0o644, 0)
	mkdir("sticky", os.ModeSticky|0o777, 0)
	mk("sticky/x.conf", "root's, in a sticky directory\n", 0o644, 0)
	os.Symlink("main.conf", filepath.Join(d, "etc/link.conf"))     // root's link, root's directory
	os.Symlink("/etc/main.conf", filepath.Join(d, "etc/abs.conf")) // absolute: inside the root
	os.Symlink("../etc/main.conf", filepath.Join(d, "user/link.conf"))
	os.Symlink("../../../../../..", filepath.Join(d, "etc/up"))
	os.Symlink(filepath.Join(d, "etc"), filepath.Join(d, "etc/loop"))
	os.Lchown(filepath.Join(d, "user/link.conf"), nobody, nobody)
	syscall.Mkfifo(filepath.Join(d, "user/fifo.log"), 0o644)
	mk("user/access.log", "a log line\n", 0o640, nobody)
	os.Link(filepath.Join(d, "etc/main.conf"), filepath.Join(d, "user/hard.log"))
	mkdir("logs", 0o755, 0)
	os.Symlink("../user", filepath.Join(d, "logs/dir"))
	return d
}

func TestFS(t *testing.T) {
	d := tree(t)
	for _, c := range []struct {
		mode Mode
		name string
		want string // the content, or "refused"/"missing"
	}{
		{Owned, "etc/main.conf", "root's\n"},
		{Owned, "etc/link.conf", "root's\n"},
		{Owned, "etc/abs.conf", "root's\n"}, // /etc/main.conf inside the root
		{Owned, "etc/theirs.conf", "refused"},
		{Owned, "etc/open.conf", "refused"},
		{Owned, "user/x.conf", "refused"},
		{Owned, "open/x.conf", "refused"},
		{Owned, "sticky/x.conf", "root's, in a sticky directory\n"},
		{Owned, "user/link.conf", "refused"},
		{Owned, "user/fifo.log", "refused"},
		{Owned, "etc/up/etc/main.conf", "root's\n"}, // ".." stops at the root
		{Owned, "etc/loop/loop/loop/main.conf", "missing"},
		{Written, "user/access.log", "a log line\n"},
		{Written, "user/x.conf", "in nobody's directory\n"},
		{Written, "user/fifo.log", "refused"},
		{Written, "user/hard.log", "refused"},
		{Written, "user/link.conf", "refused"}, // nobody's directory: the link is not followed
		{Written, "logs/dir/access.log", "a log line\n"},
		{Written, "etc/nothing.log", "missing"},
	} {
		fsys := FS{Root: d, Mode: c.mode}
		got, err := fs.ReadFile(fsys, c.name)
		switch {
		case err == nil:
			if string(got) != c.want {
				t.Errorf("%v %s: read %q, want %s", c.mode, c.name, got, c.want)
			}
		case errors.Is(err, ErrUntrusted):
			if c.want != "refused" {
				t.Errorf("%v %s: %v, want %q", c.mode, c.name, err, c.want)
			}
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ELOOP):
			if c.want != "missing" {
				t.Errorf("%v %s: %v, want %q", c.mode, c.name, err, c.want)
			}
		default:
			t.Errorf("%v %s: %v", c.mode, c.name, err)
		}
	}
}

// TestFSAbsoluteLink: an absolute symlink resolves inside the root, as
// it does for the process whose root it is.
func TestFSAbsoluteLink(t *testing.T) {
	d := tree(t)
	got, err := fs.ReadFile(FS{Root: d, Mode: Owned}, "etc/abs.conf")
	if err != nil || string(got) != "root's\n" {
		t.Fatalf("%q, %v", got, err)
	}
}

// TestFSFifoDoesNotBlock: a FIFO where a log should be is refused at
// once, with no writer on the other side.
func TestFSFifoDoesNotBlock(t *testing.T) {
	d := tree(t)
	done := make(chan error, 1)
	go func() {
		_, err := FS{Root: d, Mode: Written}.Open("user/fifo.log")
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "FIFO") {
			t.Fatalf("%v, want a refusal naming the FIFO", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("opening a FIFO blocked")
	}
}

// TestFSGlob: directories can be listed, as fs.Glob does for includes.
func TestFSGlob(t *testing.T) {
	d := tree(t)
	m, err := fs.Glob(FS{Root: d, Mode: Owned}, "etc/*.conf")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	want := []string{"etc/abs.conf", "etc/link.conf", "etc/main.conf", "etc/open.conf", "etc/theirs.conf"}
	if !slices.Equal(m, want) {
		t.Fatalf("%v, want %v", m, want)
	}
	// fs.Glob drops a directory it cannot list.
	if m, err := fs.Glob(FS{Root: d, Mode: Owned}, "user/*.conf"); len(m) > 0 || err != nil {
		t.Fatalf("listing nobody's directory: %v %v, want nothing", m, err)
	}
}

// TestProcess: a process of another user is refused, root's admitted.
func TestProcess(t *testing.T) {
	needRoot(t)
	if err := Process("/proc", os.Getpid()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot run sleep as nobody: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if err := Process("/proc", cmd.Process.Pid); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("nobody's process: %v", err)
	}
	if _, err := ProcessFS("/proc", cmd.Process.Pid, Owned); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("nobody's root: %v", err)
	}
	if _, err := OpenExe("/proc", cmd.Process.Pid); !errors.Is(err, ErrUntrusted) {
		t.Fatalf("nobody's binary: %v", err)
	}
	f, err := OpenExe("/proc", os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.CopyN(io.Discard, f, 4); err != nil {
		t.Fatal(err)
	}
}

func TestParseUIDs(t *testing.T) {
	u, err := parseUIDs("Name:\tnginx\nUid:\t0\t33\t0\t33\nGid:\t0\t0\t0\t0\n")
	if err != nil || !slices.Equal(u, []int{0, 33, 0, 33}) {
		t.Fatalf("%v %v", u, err)
	}
	for _, bad := range []string{"", "Uid:\t0\n", "Uid:\ta b c d\n"} {
		if _, err := parseUIDs(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
