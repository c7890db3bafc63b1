package netns

import (
	"bufio"
	"fmt"
	"os/exec"
	"testing"
)

// TestOwnedByRoot: this process's namespace is root's; one made by
// `unshare -rn` (a user namespace of its own, where its maker is root) is
// not.
func TestOwnedByRoot(t *testing.T) {
	if ok, err := OwnedByRoot("/proc/self/ns/net"); err != nil || !ok {
		t.Errorf("own namespace: %v, %v", ok, err)
	}
	path, err := exec.LookPath("unshare")
	if err != nil {
		t.Skip("needs unshare(1)")
	}
	cmd := exec.Command(path, "-rn", "sh", "-c", "echo ready; exec sleep 30")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare -rn: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Skipf("unshare -rn did not start (user namespaces off?): %q %v", line, err)
	}
	ok, err := OwnedByRoot(fmt.Sprintf("/proc/%d/ns/net", cmd.Process.Pid))
	if err != nil || ok {
		t.Errorf("a user's own namespace taken for root's: %v, %v", ok, err)
	}
}
