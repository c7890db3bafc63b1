package netns

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// skipUnlessRoot skips tests that create namespaces.
func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces")
	}
}

// testName is a namespace name of this test process: not one the lab's
// Clean would take for a lab's (nd-…-srv) and delete under another test.
func testName(t *testing.T, what string) string {
	t.Helper()
	return fmt.Sprintf("ndtest-%s-%d", what, os.Getpid())
}

// create makes a namespace that the test's end deletes, on failure too.
func create(t *testing.T, name string) NS {
	t.Helper()
	n, err := Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Delete(name); err != nil && !errors.Is(err, ErrNotFound) {
			t.Error(err)
		}
	})
	return n
}

// wantThreadsHome fails when any thread of this process is in another
// namespace than home: an OS thread that Create left inside the new
// namespace, and unlocked, would run other goroutines there.
func wantThreadsHome(t *testing.T, home uint64) {
	t.Helper()
	tasks, err := filepath.Glob("/proc/self/task/*/ns/net")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("no threads: %v", err)
	}
	for _, p := range tasks {
		if ino, err := Inode(p); err == nil && ino != home {
			t.Errorf("%s is namespace %d, not this process's %d", p, ino, home)
		}
	}
}

func TestCreateListDelete(t *testing.T) {
	skipUnlessRoot(t)
	home, err := Inode("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	name := testName(t, "create")
	n := create(t, name)
	if n.Name != name || n.Path != "/run/netns/"+name || n.Inode == 0 || n.Inode == home {
		t.Errorf("Create(%q) = %+v (home %d)", name, n, home)
	}
	wantThreadsHome(t, home)
	// The namespace is a new one, with its own lo.
	if err := n.Do(func() error {
		_, err := os.Stat("/proc/sys/net/ipv4/conf/lo")
		return err
	}); err != nil {
		t.Errorf("inside %s: %v", name, err)
	}
	names, err := List()
	if err != nil || !slices.Contains(names, name) {
		t.Errorf("List() = %v, %v; want %s in it", names, err, name)
	}
	if _, err := Create(name); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create of an existing name: %v, want fs.ErrExist", err)
	}
	if again, err := Resolve(name); err != nil || again.Inode != n.Inode {
		t.Errorf("the existing namespace was touched: %+v, %v", again, err)
	}
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if names, _ := List(); slices.Contains(names, name) {
		t.Errorf("List() after Delete = %v", names)
	}
	if _, err := Resolve(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("Resolve after Delete: %v, want ErrNotFound", err)
	}
	if err := Delete(name); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Delete: %v, want ErrNotFound", err)
	}
	for _, bad := range []string{"", "..", "a/b"} {
		if _, err := Create(bad); err == nil {
			Delete(bad)
			t.Errorf("Create(%q): no error", bad)
		}
	}
}

// TestDeleteHalfCreated: a file in /run/netns without its mount (what a
// Create that failed at the mount leaves) is removed as `ip netns del`
// would.
func TestDeleteHalfCreated(t *testing.T) {
	skipUnlessRoot(t)
	name := testName(t, "half")
	path := filepath.Join("/run/netns", name)
	if err := os.WriteFile(path, nil, 0o444); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	if err := Delete(name); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s left: %v", path, err)
	}
}

func TestPIDs(t *testing.T) {
	skipUnlessRoot(t)
	n := create(t, testName(t, "pids"))
	// A child forked from a thread inside the namespace is born in it.
	var cmd *exec.Cmd
	if err := n.Do(func() error {
		cmd = exec.Command("sleep", "60")
		return cmd.Start()
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pids, err := PIDs(n)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(pids, []int{cmd.Process.Pid}) {
		t.Errorf("PIDs(%s) = %v, want [%d]", n, pids, cmd.Process.Pid)
	}
	// By name alone (no inode yet), as Clean finds a namespace.
	if pids, err := PIDs(Parse(n.Name)); err != nil || !slices.Equal(pids, []int{cmd.Process.Pid}) {
		t.Errorf("PIDs(Parse(%s)) = %v, %v", n.Name, pids, err)
	}
	own, err := PIDs(NS{})
	if err != nil || !slices.Contains(own, os.Getpid()) || slices.Contains(own, cmd.Process.Pid) {
		t.Errorf("PIDs of this namespace = %v, %v: want this process (%d), not the child", own, err, os.Getpid())
	}
}

// TestInitial: from the initial namespace Initial is the caller's own;
// from inside a child namespace it is found through the parent process.
func TestInitial(t *testing.T) {
	if ino := os.Getenv("NETNS_TEST_INITIAL"); ino != "" {
		// The helper, started inside a child namespace.
		n, err := Initial()
		if err != nil || n.Own() || strconv.FormatUint(n.Inode, 10) != ino {
			t.Fatalf("Initial() = %+v, %v; want namespace %s", n, err, ino)
		}
		return
	}
	skipUnlessRoot(t)
	n, err := Initial()
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Do(func() error {
		return unix.Access("/proc/sys/net/core/netdev_max_backlog", unix.W_OK)
	}); err != nil {
		t.Errorf("Initial() = %+v: host-wide settings are not writable there: %v", n, err)
	}
	child := create(t, testName(t, "initial"))
	if isInitial(child.Path) {
		t.Errorf("a new namespace passes for the initial one")
	}
	var out []byte
	err = child.Do(func() error {
		cmd := exec.Command(os.Args[0], "-test.run=^TestInitial$", "-test.count=1")
		cmd.Env = append(os.Environ(), "NETNS_TEST_INITIAL="+strconv.FormatUint(n.Inode, 10))
		out, err = cmd.CombinedOutput()
		return err
	})
	if err != nil {
		t.Errorf("Initial() from inside %s: %v\n%s", child, err, out)
	}
}
