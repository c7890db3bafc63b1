package tune

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// TestRollbackKeepsFailed: rollback restores in the order apply made the
// changes, tries every entry past one it cannot restore, and leaves the
// journal "applying" on disk until a later rollback restores everything.
func TestRollbackKeepsFailed(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates a network namespace")
	}
	name := fmt.Sprintf("ndtest-tune-%d", os.Getpid())
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { netns.Delete(name) })
	set := func(k, v string) {
		t.Helper()
		if err := sysctl.Write(ns, k, v); err != nil {
			t.Fatal(err)
		}
	}
	// As apply left them: changed from 10 and 20000 20050.
	set("net.core.somaxconn", "4096")
	set("net.ipv4.ip_local_port_range", "15000 65000")
	entry := func(k, old, now string) Entry {
		return Entry{Key: "sysctl:" + k, Sysctl: &SysctlWas{Name: k, Old: old, New: now, Path: ns.Path, Inode: ns.Inode, Scope: name}, Done: true}
	}
	j := &Journal{Version: Version, Path: filepath.Join(t.TempDir(), "j.json"), State: StateApplying, Entries: []Entry{
		entry("net.core.somaxconn", "10", "4096"),
		entry("net.core.no_such_setting", "1", "2"),
		entry("net.ipv4.ip_local_port_range", "20000 20050", "15000 65000"),
	}}
	if err := j.save(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err = Rollback(j, &out)
	if err == nil || !strings.Contains(err.Error(), "net.core.no_such_setting") {
		t.Errorf("Rollback = %v, want the missing setting's failure", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "somaxconn = 10 restored") || !strings.Contains(lines[1], "FAILED: sysctl:net.core.no_such_setting") ||
		!strings.Contains(lines[2], "ip_local_port_range = 20000 20050 restored") {
		t.Errorf("rollback said, in this order:\n%s\nwant somaxconn, the failure, the port range", out.String())
	}
	for k, want := range map[string]string{"net.core.somaxconn": "10", "net.ipv4.ip_local_port_range": "20000 20050"} {
		if got, err := sysctl.Read(ns, k); got != want {
			t.Errorf("%s = %q, %v after rollback; want %q", k, got, err, want)
		}
	}
	if again, err := ReadJournal(j.Path); err != nil || again.State != StateApplying {
		t.Fatalf("journal after a failed rollback: %+v, %v; want it kept, applying", again, err)
	}
	// Without the entry that cannot be restored, a second rollback
	// finishes and says so on disk.
	j.Entries = append(j.Entries[:1], j.Entries[2:]...)
	out.Reset()
	if err := Rollback(j, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "is 10 as it was") {
		t.Errorf("second rollback said:\n%s", out.String())
	}
	if again, err := ReadJournal(j.Path); err != nil || again.State != StateRolledBack {
		t.Errorf("journal after rollback: %+v, %v; want rolled-back", again, err)
	}
}
