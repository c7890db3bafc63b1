package tune

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/journal"
	"github.com/netdoctor/netdoctor/internal/safepath"
)

func TestPersistContent(t *testing.T) {
	set := []Sysctl{{Name: "net.netfilter.nf_conntrack_max", Proposed: "262144"}, {Name: "net.core.somaxconn", Proposed: "4096"}}
	got := string(persistContent(nil, false, set))
	want := "# Written by netdoctor tune apply --persist; `netdoctor tune rollback` restores the previous state.\n" +
		"net.core.somaxconn = 4096\nnet.netfilter.nf_conntrack_max = 262144\n"
	if got != want {
		t.Errorf("new file:\n%s\nwant\n%s", got, want)
	}
	// An existing file: other keys and comments stay, earlier lines for
	// these keys go, a missing final newline is mended.
	old := "# mine\nvm.swappiness = 10\nnet.core.somaxconn=128\n# net.core.somaxconn = 5\nfs.file-max = 100000"
	got = string(persistContent([]byte(old), true, set))
	want = "# mine\nvm.swappiness = 10\n# net.core.somaxconn = 5\nfs.file-max = 100000\nnet.core.somaxconn = 4096\nnet.netfilter.nf_conntrack_max = 262144\n"
	if got != want {
		t.Errorf("existing file:\n%s\nwant\n%s", got, want)
	}
	// Written again: the same bytes.
	if again := string(persistContent([]byte(got), true, set)); again != got {
		t.Errorf("not idempotent:\n%s", again)
	}
}

// TestReadJournalV1: a journal written by the version-1 code before the
// journal package existed (testdata/journal-v1.json, one entry of every
// kind) reads back whole, and saves back byte for byte: rollback after an
// upgrade, or a reboot, finds what apply wrote.
func TestReadJournalV1(t *testing.T) {
	// A copy as apply leaves a journal, 0600: the checkout's may be
	// group-writable (umask 002), which rollback does not read.
	b, err := os.ReadFile("testdata/journal-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "journal-v1.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := ReadJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	want := &Journal{Version: 1, Path: path, Plan: "/root/plan.json",
		Started: time.Date(2025, 11, 20, 9, 14, 3, 123456789, time.UTC),
		Owner:   journal.Owner{PID: 4242, Start: 987654}, State: StateApplying,
		Entries: []Entry{
			{Key: "sysctl:net.netfilter.nf_conntrack_max@host (global)", Title: "sysctl net.netfilter.nf_conntrack_max: 200 → 262144 (host (global))",
				Sysctl: &SysctlWas{Name: "net.netfilter.nf_conntrack_max", Old: "200", New: "262144", Inode: 4026531840, Global: true, Scope: "host (global)"}, Done: true},
			{Key: "sysctl:net.core.somaxconn@nd-x-srv", Title: "sysctl net.core.somaxconn: 10 → 4096 (nd-x-srv)",
				Sysctl: &SysctlWas{Name: "net.core.somaxconn", Old: "10", New: "4096", Path: "/run/netns/nd-x-srv", Inode: 4026532300, Scope: "nd-x-srv"}, Done: true},
			{Key: "sysctl:net.ipv4.ip_local_port_range@nd-x-srv", Title: "sysctl net.ipv4.ip_local_port_range: 20000 20050 → 15000 65000 (nd-x-srv)",
				Sysctl: &SysctlWas{Name: "net.ipv4.ip_local_port_range", Old: "20000 20050", New: "15000 65000", Path: "/run/netns/nd-x-srv", Inode: 4026532300, Scope: "nd-x-srv"}},
			{Key: "file:/tmp/netdoctor-lab-x/php-fpm/php-fpm.conf", Title: "php-fpm config: 1 lines changed",
				File: &FileWas{Path: "/tmp/netdoctor-lab-x/php-fpm/php-fpm.conf", Existed: true, Mode: 0o644,
					Old: []byte("[www]\npm.max_children = 5\n"), OldSHA: "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c4b5a69788796a5b4c3d2e1f0",
					NewSHA: "a0b1c2d3e4f5061728394a5b6c7d8e9fa0b1c2d3e4f5061728394a5b6c7d8e9f", App: "php-fpm",
					Check:  []string{"/usr/sbin/php-fpm8.2", "-t", "-y", "/tmp/netdoctor-lab-x/php-fpm/php-fpm.conf"},
					Reload: &Reload{PID: 5151, Start: 990001, Exe: "/usr/sbin/php-fpm8.2", Signal: "USR2"}}},
			{Key: "listen:10.99.7.1:80", Title: "listen() again on 10.99.7.1:80 (nginx pid 5200): backlog 10 → 4096",
				Listen: &ListenWas{Addr: "10.99.7.1:80", PID: 5200, Start: 990100, Old: 10, New: 4096}},
			{Key: "file:/etc/sysctl.d/90-netdoctor.conf", Title: "persist 1 settings in /etc/sysctl.d/90-netdoctor.conf",
				File: &FileWas{Path: "/etc/sysctl.d/90-netdoctor.conf", Mode: 0o644, OldSHA: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
					NewSHA: "5d41402abc4b2a76b9719d911017c592ae41e4649b934ca495991b7852b855"}},
		}}
	if diff := cmp.Diff(want, j); diff != "" {
		t.Errorf("ReadJournal(%s) mismatch (-want +got):\n%s", path, diff)
	}
	j.Path = filepath.Join(t.TempDir(), "j.json")
	if err := j.save(); err != nil {
		t.Fatal(err)
	}
	old, _ := os.ReadFile(path)
	if now, _ := os.ReadFile(j.Path); string(now) != string(old) {
		t.Errorf("saved again, the journal changed shape:\n%s\nwas:\n%s", now, old)
	}
}

// TestReadJournalErrors: what rollback refuses, with the file named.
func TestReadJournalErrors(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{"garbage.json": "not json", "v2.json": `{"version": 2}`} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		if _, err := ReadJournal(p); err == nil || !strings.HasPrefix(err.Error(), p+" is not a netdoctor journal") {
			t.Errorf("ReadJournal(%s) = %v", name, err)
		}
	}
	if _, err := ReadJournal(filepath.Join(dir, "missing.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadJournal(missing) = %v, want fs.ErrNotExist", err)
	}
	// A journal others may have written: rollback would write back the
	// files it holds and run their validation.
	open := filepath.Join(dir, "open.json")
	os.WriteFile(open, []byte(`{"version": 1}`), 0o600)
	os.Chmod(open, 0o666)
	if _, err := ReadJournal(open); !errors.Is(err, safepath.ErrNotPrivate) {
		t.Errorf("ReadJournal(open) = %v, want ErrNotPrivate", err)
	}
}
