package journal

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// TestSaveSyncs runs one Save under strace and wants, in this order: the
// new content fsync'd in its temporary file, the rename over the journal,
// and the directory fsync'd so that the rename survives a crash too.
func TestSaveSyncs(t *testing.T) {
	if path := os.Getenv("JOURNAL_TEST_SAVE"); path != "" {
		if err := Save(path, testJournal{Entries: []string{"x"}}); err != nil {
			t.Fatal(err)
		}
		return
	}
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("needs strace to see the fsyncs")
	}
	dir := t.TempDir()
	path, trace := filepath.Join(dir, "j.json"), filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, "-f", "-y", "-qq", "-e", "signal=none", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o", trace,
		os.Args[0], "-test.run=^TestSaveSyncs$", "-test.count=1")
	cmd.Env = append(os.Environ(), "JOURNAL_TEST_SAVE="+path)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here: %v\n%s", err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	q := regexp.QuoteMeta
	want := regexp.MustCompile(`(?s)f(data)?sync\(\d+<` + q(dir) + `/\.j\.json\.tmp-\d+>\) = 0.*` +
		`rename(at2?)?\([^\n]*` + q(path) + `"[^\n]*\) = 0.*` +
		`fsync\(\d+<` + q(dir) + `>\) = 0`)
	if !want.Match(b) {
		t.Errorf("Save's system calls:\n%s\nwant the file synced, renamed, then its directory synced", b)
	}
}
