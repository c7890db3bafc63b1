package app

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestWaitsSleeping: a real process in nanosleep is seen sleeping, not
// idle or running. These are the kernel's own wait channel names on the
// running kernel: if they change, the mapping must follow.
func TestWaitsSleeping(t *testing.T) {
	if _, err := os.Stat("/proc/self/wchan"); err != nil {
		t.Skip("no /proc/PID/wchan on this kernel")
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	deadline := time.Now().Add(2 * time.Second)
	for {
		classes, other := Waits("/proc", []int{cmd.Process.Pid}, 0)
		if classes[WaitSleep] == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sleep(1) seen as %v (other %v)", classes, other)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
