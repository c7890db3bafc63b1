package journal

import (
	"os/exec"
	"testing"
)

// TestSelf: this process is alive as Self, with its start time; a child
// that has exited is not, nor is this PID with another start time (what
// a journal of a dead process whose PID came back to another looks like).
func TestSelf(t *testing.T) {
	self := Self()
	if self.Start == 0 || !self.Alive() {
		t.Fatalf("Self() = %+v, Alive %v", self, self.Alive())
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if dead := (Owner{PID: cmd.Process.Pid, Start: self.Start}); dead.Alive() {
		t.Errorf("exited child %+v is alive", dead)
	}
	if reused := (Owner{PID: self.PID, Start: self.Start + 1}); reused.Alive() {
		t.Errorf("%+v is alive: a reused PID passes for its journal's owner", reused)
	}
}
