package lab

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/journal"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sysctl"
)

// testGlobal is the host-wide setting these tests change: one no lab
// changes, so that labs of other test packages running at the same time
// neither hold it nor see it move.
const testGlobal = "fs.aio-max-nr"

func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it creates network namespaces and changes a host-wide setting")
	}
}

// keepGlobal returns testGlobal's value and puts it back when the test
// ends, should the code under test not.
func keepGlobal(t *testing.T) int {
	t.Helper()
	v, err := sysctl.Read(netns.NS{}, testGlobal)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if now, _ := sysctl.Read(netns.NS{}, testGlobal); now != v {
			t.Errorf("%s left at %s: restoring %s", testGlobal, now, v)
			sysctl.Write(netns.NS{}, testGlobal, v)
		}
	})
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func readGlobal(t *testing.T) string {
	t.Helper()
	v, err := sysctl.Read(netns.NS{}, testGlobal)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func newEnv(t *testing.T, id string) *Env {
	t.Helper()
	e, err := New(id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// TestSetGlobalLastOut: two labs change one host-wide setting; the
// second journals the value from before the first, the first to close
// leaves the second's value, the last restores the original.
func TestSetGlobalLastOut(t *testing.T) {
	skipUnlessRoot(t)
	orig := keepGlobal(t)
	id := strconv.Itoa(os.Getpid() % 10000)
	a, b := newEnv(t, "ga"+id), newEnv(t, "gb"+id)
	if err := a.SetGlobal(testGlobal, strconv.Itoa(orig+1)); err != nil {
		t.Fatal(err)
	}
	if err := b.SetGlobal(testGlobal, strconv.Itoa(orig+2)); err != nil {
		t.Fatal(err)
	}
	s, err := readState(b.state.path)
	if err != nil {
		t.Fatal(err)
	}
	if g := s.Changes[len(s.Changes)-1].Global; g == nil || g.Sysctl != testGlobal || g.Old != strconv.Itoa(orig) {
		t.Errorf("second lab journaled %+v, want %s's value from before the first lab (%d)", g, testGlobal, orig)
	}
	if held := LiveChanges()["/proc/sys/fs/aio-max-nr"]; held != strconv.Itoa(orig) {
		t.Errorf("LiveChanges holds %q for %s, want %d", held, testGlobal, orig)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readGlobal(t); got != strconv.Itoa(orig+2) {
		t.Errorf("%s = %s after the first lab closed, want the second lab's %d", testGlobal, got, orig+2)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := readGlobal(t); got != strconv.Itoa(orig) {
		t.Errorf("%s = %s after the last lab closed, want %d", testGlobal, got, orig)
	}
	for _, e := range []*Env{a, b} {
		if _, err := os.Stat(e.state.path); !os.IsNotExist(err) {
			t.Errorf("journal %s left: %v", e.state.path, err)
		}
	}
}

// legacyJournal writes a journal in the shape netdoctor wrote before the
// journal package (start a string, globals by /proc path).
func legacyJournal(t *testing.T, id string, owner journal.Owner, ns, dir string, globals map[string]string) string {
	t.Helper()
	type g struct {
		Path string `json:"path"`
		Old  string `json:"old"`
	}
	j := struct {
		PID     int      `json:"pid"`
		Start   string   `json:"start"`
		Netns   []string `json:"netns"`
		Paths   []string `json:"paths"`
		Globals []g      `json:"globals"`
	}{PID: owner.PID, Start: strconv.FormatUint(owner.Start, 10), Netns: []string{ns}, Paths: []string{dir}}
	for p, old := range globals {
		j.Globals = append(j.Globals, g{p, old})
	}
	b, err := json.MarshalIndent(j, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(StateDir, id+".json")
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(path) })
	return path
}

// legacyNetns creates a namespace named as a lab's, deleted when the test
// ends should Clean not delete it.
func legacyNetns(t *testing.T, name string) netns.NS {
	t.Helper()
	ns, err := netns.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteNetns(name) })
	return ns
}

// TestCleanLegacyJournal: lab clean undoes a lab killed under the older
// netdoctor, from its journal of the older shape (its start time a
// string): the global restored, the process in its namespace killed, the
// namespace deleted, its directory removed. A lab whose owner still runs
// is left alone, journal and all.
func TestCleanLegacyJournal(t *testing.T) {
	skipUnlessRoot(t)
	orig := keepGlobal(t)
	id := strconv.Itoa(os.Getpid() % 10000)
	dead, live := "cd"+id, "cl"+id
	deadNS, liveNS := "nd-"+dead+"-srv", "nd-"+live+"-srv"
	ns := legacyNetns(t, deadNS)
	legacyNetns(t, liveNS)
	var sleep *exec.Cmd
	if err := ns.Do(func() error { sleep = exec.Command("sleep", "60"); return sleep.Start() }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	deadDir, liveDir := t.TempDir(), t.TempDir()
	if err := sysctl.Write(netns.NS{}, testGlobal, strconv.Itoa(orig+3)); err != nil {
		t.Fatal(err)
	}
	// The dead lab's PID is this process's, reused: only the start
	// time, a string in this shape, tells it from the live one.
	self := journal.Self()
	deadJournal := legacyJournal(t, dead, journal.Owner{PID: self.PID, Start: self.Start - 1}, deadNS, deadDir,
		map[string]string{"/proc/sys/fs/aio-max-nr": strconv.Itoa(orig) + "\n"})
	liveJournal := legacyJournal(t, live, self, liveNS, liveDir, nil)

	done, err := Clean()
	if err != nil {
		t.Errorf("Clean: %v", err)
	}
	text := strings.Join(done, "\n")
	for _, want := range []string{
		fmt.Sprintf("restored /proc/sys/fs/aio-max-nr to %d", orig),
		fmt.Sprintf("killed %d (sleep) in %s", sleep.Process.Pid, deadNS),
		"deleted namespace " + deadNS,
		"removed " + deadDir,
	} {
		if !slices.Contains(done, want) {
			t.Errorf("Clean said nothing of %q:\n%s", want, text)
		}
	}
	if got := readGlobal(t); got != strconv.Itoa(orig) {
		t.Errorf("%s = %s after Clean, want %d", testGlobal, got, orig)
	}
	if names, _ := netns.List(); slices.Contains(names, deadNS) || !slices.Contains(names, liveNS) {
		t.Errorf("namespaces after Clean: %v; want %s gone and %s kept", names, deadNS, liveNS)
	}
	for path, want := range map[string]bool{deadJournal: false, deadDir: false, liveJournal: true, liveDir: true} {
		if _, err := os.Stat(path); (err == nil) != want {
			t.Errorf("%s exists: %v, want %v", path, err == nil, want)
		}
	}
	if strings.Contains(text, live) {
		t.Errorf("Clean touched the live lab:\n%s", text)
	}
}

// TestCleanLeavesOthersDirs: a netdoctor-lab-* directory in /tmp that
// another user made (or a symlink planted there) is not a lab's; Clean
// running as root must not remove it or what it points to.
func TestCleanLeavesOthersDirs(t *testing.T) {
	skipUnlessRoot(t)
	id := strconv.Itoa(os.Getpid())
	theirs := filepath.Join(os.TempDir(), "netdoctor-lab-other"+id)
	target := t.TempDir()
	link := filepath.Join(os.TempDir(), "netdoctor-lab-link"+id)
	ours := filepath.Join(os.TempDir(), "netdoctor-lab-ours"+id)
	for _, d := range []string{theirs, ours} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
	}
	if err := os.Chown(theirs, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	done, err := Clean()
	if err != nil {
		t.Errorf("Clean: %v", err)
	}
	if !slices.Contains(done, "removed "+ours) {
		t.Errorf("Clean left its own %s: %v", ours, done)
	}
	for _, p := range []string{theirs, link, target} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("Clean removed %s, not its own: %v", p, err)
		}
	}
}

// TestCleanBesideNew: `lab clean` while labs are being built beside it
// (a user's second terminal, or the tests of Clean beside other
// packages' labs) leaves every live lab whole: each lab New returns has
// its directory and its namespaces, however Clean's reading of the
// journals and its removals fall around New's directory and journal (CI:
// a test's lab lost its directory to TestCleanLeavesOthersDirs).
func TestCleanBesideNew(t *testing.T) {
	skipUnlessRoot(t)
	stop := make(chan struct{})
	cleaned := make(chan int)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				cleaned <- n
				return
			default:
			}
			Clean()
			n++
		}
	}()
	defer func() {
		close(stop)
		t.Logf("%d cleans beside the labs", <-cleaned)
	}()
	for i := range 8 {
		e, err := New(fmt.Sprintf("cb%d-%d", os.Getpid()%10000, i))
		if err != nil {
			t.Fatal(err)
		}
		var lost []string
		for _, p := range []string{e.Dir, e.ServerNS.Path, e.ClientNS.Path} {
			if _, err := os.Stat(p); err != nil {
				lost = append(lost, p)
			}
		}
		if err := e.Close(); err != nil {
			t.Errorf("lab %d: Close: %v", i, err)
		}
		if len(lost) > 0 {
			t.Fatalf("lab %d, live, lost %v to Clean beside it", i, lost)
		}
	}
}
