package app

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/netdoctor/netdoctor/internal/poll"
)

// TestFindLogsOwner: a process that does not run as root has its logs
// read only where it owns them. nobody's process holds two descriptors
// open for appending: its own log, and root's file handed to it (as a
// daemon that opened it before dropping its privileges would hold
// it); a third, nobody's, is open read-only. Only the first is found.
func TestFindLogsOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: a process of nobody's holding root's file")
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	open := func(name string, flag int, uid int) *os.File {
		p := filepath.Join(dir, name)
		f, err := os.OpenFile(p, flag|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, uid, uid); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	own := open("own.log", os.O_WRONLY|os.O_APPEND, 65534)
	roots := open("root-secret", os.O_WRONLY|os.O_APPEND, 0)
	readOnly := open("read.log", os.O_RDONLY, 65534)
	cmd := exec.Command("/bin/sleep", "30")
	cmd.ExtraFiles = []*os.File{own, roots, readOnly}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// Until the child has exec'd (its uid is nobody's).
	poll.Until(t, 5e9, func() error {
		if uid, ok := euid("/proc", cmd.Process.Pid); !ok || uid != 65534 {
			return os.ErrNotExist
		}
		return nil
	})
	o := &Observer{proc: "/proc"}
	s := &Server{PIDs: []int{cmd.Process.Pid}}
	o.findLogs(s)
	if len(s.Logs) != 1 || s.Logs[0].Path != own.Name() || s.Logs[0].Kind != "found" {
		for _, l := range s.Logs {
			t.Logf("found %s (%s)", l.Path, l.Source)
		}
		t.Fatalf("%d logs found, want only %s", len(s.Logs), own.Name())
	}
}
