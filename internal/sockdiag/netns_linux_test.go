package sockdiag

import (
	"errors"
	"fmt"
	"os"
	"testing"

	vnetlink "github.com/vishvananda/netlink"

	"github.com/netdoctor/netdoctor/internal/netns"
)

// newNetns creates a network namespace with lo up, deleted when the test
// ends, on failure too. It skips the test when not root.
func newNetns(t testing.TB, what string) netns.NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	name := fmt.Sprintf("ndtest-sockdiag-%s-%d", what, os.Getpid())
	n, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := netns.Delete(name); err != nil && !errors.Is(err, netns.ErrNotFound) {
			t.Error(err)
		}
	})
	if err := n.Do(func() error {
		lo, err := vnetlink.LinkByName("lo")
		if err != nil {
			return err
		}
		return vnetlink.LinkSetUp(lo)
	}); err != nil {
		t.Fatalf("lo up in %s: %v", name, err)
	}
	return n
}
