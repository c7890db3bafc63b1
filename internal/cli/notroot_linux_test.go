package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestNotRoot runs netdoctor as an unprivileged user: observing another
// namespace must fail with exit 3 and a clear message, and a check of its
// own namespace must still produce a report, marked partial where it
// could not read (the kernel log).
func TestNotRoot(t *testing.T) {
	if os.Getenv("ND_NOTROOT") != "" {
		notRootChild(t)
		return
	}
	ns := testNetns(t)
	// The test binary lives in a directory only root may enter: copy it
	// somewhere nobody can run it from.
	dir, err := os.MkdirTemp("", "ndnotroot")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "cli.test")
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	writeExe(t, bin, exe)
	os.Chmod(dir, 0o755)
	cmd := exec.Command(bin, "-test.run=^TestNotRoot$", "-test.v")
	cmd.Env = append(os.Environ(), "ND_NOTROOT="+ns)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestNotRoot") {
		t.Fatalf("unprivileged run failed: %v\n%s", err, out)
	}
}

func notRootChild(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Fatal("child still root")
	}
	code, _, stderr := runCLI(t, "check", "--netns", os.Getenv("ND_NOTROOT"), "--window", "100ms", "--no-dns")
	if code != ExitDenied || !strings.Contains(stderr, "needs root") {
		t.Errorf("check --netns as nobody: exit %d, stderr %q; want %d and 'needs root'", code, stderr, ExitDenied)
	}
	// Another process's namespace is open to root only (EACCES): the
	// same exit, not a failure to report.
	code, _, stderr = runCLI(t, "check", "--netns", "/proc/1/ns/net", "--window", "100ms", "--no-dns")
	if code != ExitDenied || !strings.Contains(stderr, "needs root") {
		t.Errorf("check --netns /proc/1/ns/net as nobody: exit %d, stderr %q; want %d and 'needs root'", code, stderr, ExitDenied)
	}
	code, _, stderr = runCLI(t, "run", "--server-netns", "/proc/1/ns/net", "-d", "1s", "http://127.0.0.1:1/")
	if code != ExitDenied || !strings.Contains(stderr, "needs root") {
		t.Errorf("run --server-netns /proc/1/ns/net as nobody: exit %d, stderr %q; want %d and 'needs root'", code, stderr, ExitDenied)
	}
	code, stdout, stderr := runCLI(t, "check", "--window", "100ms", "--no-dns")
	if code != ExitOK && code != ExitFindings {
		t.Fatalf("check as nobody: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "kmsg=unavailable") || !strings.Contains(stderr, "partial evidence") {
		t.Errorf("check as nobody does not report the unreadable kernel log as partial:\n%s\n%s", stdout, stderr)
	}
	// tune: a dry run needs no root; making or undoing changes does.
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(`{"version": 1, "changes": [{"kind": "sysctl", "key": "k", "findings": ["accept-queue-overflow"], "why": ["test"],
		"sysctl": {"name": "net.core.somaxconn", "current": "4096", "proposed": "65535", "persist": "x"}}]}`), 0o644)
	for _, args := range [][]string{{"tune", "apply", plan, "--yes"}, {"tune", "rollback"}} {
		if code, _, stderr := runCLI(t, args...); code != ExitDenied || !strings.Contains(stderr, "need root") {
			t.Errorf("%v as nobody: exit %d, stderr %q; want %d and 'need root'", args, code, stderr, ExitDenied)
		}
	}
	if code, stdout, stderr := runCLI(t, "tune", "apply", plan); code != ExitOK || !strings.Contains(stdout, " → 65535") {
		t.Errorf("dry run as nobody: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
