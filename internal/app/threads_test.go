package app

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWaitOf: what a blocked thread is in, from /proc/PID/task/TID/syscall
// as 6.18 writes it (captured from a JVM's pool-1-thread-1 idle, then in
// Thread.sleep), and from odd ones: a running thread, a truncated line,
// a thread in no system call.
func TestWaitOf(t *testing.T) {
	for _, tc := range []struct{ name, syscall, want string }{
		{"idle on its queue", "202 0x7eff5000706c 0x189 0x0 0x0 0x0 0xffffffff 0x7effc3ffe9a0 0x7effef6f3e06\n", "futex 0x7eff5000706c"},
		{"in Thread.sleep", "202 0x7eff50007778 0x89 0x0 0x7effc459d2e0 0x0 0xffffffff 0x7effc459d1f0 0x7effef6f3e06\n", "futex 0x7eff50007778 timed"},
		{"reading", "0 0xc 0x7f0000001000 0x2000 0x0 0x0 0x0 0x7ffc0 0x7f00\n", "read 0xc"},
		{"running", "running\n", "do_sys_poll"},
		{"truncated", "202", "do_sys_poll"},
		{"in no call", "-1 0x7ffd1234 0x7f00\n", "syscall -1 0x7ffd1234"},
	} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "syscall"), []byte(tc.syscall), 0o600); err != nil {
			t.Fatal(err)
		}
		if got := waitOf(dir, 1, "do_sys_poll"); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := waitOf(filepath.Join(t.TempDir(), "gone"), 1, "ep_poll"); got != "ep_poll" {
		t.Errorf("a thread gone: %q, want its wait channel", got)
	}
}

// TestSameWait: a thread waits as it idled when it is in the same call
// on the same first argument; a futex on the same condition variable
// (glibc alternates two words of it) and as timed or not.
func TestSameWait(t *testing.T) {
	for _, tc := range []struct {
		w, idle string
		same    bool
	}{
		{"futex 0x7eff5000706c", "futex 0x7eff5000706c", true},
		{"futex 0x7eff50007068", "futex 0x7eff5000706c", true},
		{"futex 0x7eff50007778 timed", "futex 0x7eff5000706c", false},
		{"futex 0x7eff50007068 timed", "futex 0x7eff5000706c", false},
		{"futex 0x7eff50007778", "futex 0x7eff5000706c", false},
		{"read 0xc", "read 0xc", true},
		{"read 0xd", "read 0xc", false},
		{"futex zz", "futex 0x1", false},
	} {
		if got := SameWait(tc.w, tc.idle); got != tc.same {
			t.Errorf("SameWait(%q, %q) = %v", tc.w, tc.idle, got)
		}
	}
}

// TestFamily: threads named alike but for a number are one family; the
// runtime's own threads are known by name.
func TestFamily(t *testing.T) {
	for name, want := range map[string]string{"pool-1-thread-3": "pool-1-thread-", "pool-1-thread-1": "pool-1-thread-", "http-nio-8080-exec-12": "http-nio-8080-exec-", "GC Thread#1": "GC Thread#", "main": "main"} {
		if got := Family(name); got != want {
			t.Errorf("Family(%q) = %q, want %q", name, got, want)
		}
	}
	for _, n := range []string{"GC Thread#0", "C2 CompilerThre", "VM Thread", "HTTP-Dispatcher", "G1 Conc#0"} {
		if !RuntimeThread(n) {
			t.Errorf("%q is the runtime's", n)
		}
	}
	if RuntimeThread("pool-1-thread-1") {
		t.Error("an executor's worker is the runtime's")
	}
}
