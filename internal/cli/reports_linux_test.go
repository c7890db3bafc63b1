package cli

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/netdoctor/netdoctor/internal/lab/labrun"
)

// sharedTmp is a directory like /tmp, which TMPDIR points at for the
// test: anyone may create names in it.
func sharedTmp(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes files of another user")
	}
	dir := filepath.Join(t.TempDir(), "tmp")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|fs.ModeSticky); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	return dir
}

// TestLabReportsPreempted: another user has made the lab's default
// reports directory first, or a symlink there to a directory of theirs:
// lab run writes its reports in a new private directory instead, says
// so, and writes nothing through the link; made by no one, the default
// is created private to root.
func TestLabReportsPreempted(t *testing.T) {
	for _, c := range []struct {
		name string
		make func(path, target string) error
	}{
		{"a directory", func(path, _ string) error { return os.Mkdir(path, 0o777) }},
		{"a symlink", func(path, target string) error { return os.Symlink(target, path) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tmp := sharedTmp(t)
			target := filepath.Join(t.TempDir(), "theirs")
			if err := os.Mkdir(target, 0o777); err != nil {
				t.Fatal(err)
			}
			def := filepath.Join(tmp, "netdoctor-reports")
			if err := c.make(def, target); err != nil {
				t.Fatal(err)
			}
			if err := os.Lchown(def, 65534, 65534); err != nil {
				t.Fatal(err)
			}
			var stderr strings.Builder
			dir, err := labrun.Reports("healthy", &stderr)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(dir, def+"/") || !strings.HasPrefix(dir, tmp+"/netdoctor-reports-") {
				t.Errorf("reports in %s, want a new directory beside %s", dir, def)
			}
			if !strings.Contains(stderr.String(), "belongs to uid 65534") && !strings.Contains(stderr.String(), "is a symlink") ||
				!strings.Contains(stderr.String(), "reports in "+filepath.Dir(dir)+" instead") {
				t.Errorf("stderr %q does not say why the reports are elsewhere", stderr.String())
			}
			if err := writeOut(filepath.Join(dir, "before.json"), nil, "report", indentedJSON(map[string]int{"version": 1})); err != nil {
				t.Fatal(err)
			}
			if ents, _ := os.ReadDir(target); len(ents) > 0 {
				t.Errorf("written through their path: %v", ents)
			}
			if ents, _ := os.ReadDir(def); c.name == "a directory" && len(ents) > 0 {
				t.Errorf("written in their directory: %v", ents)
			}
		})
	}
	t.Run("free", func(t *testing.T) {
		tmp := sharedTmp(t)
		var stderr strings.Builder
		dir, err := labrun.Reports("healthy", &stderr)
		if err != nil || dir != filepath.Join(tmp, "netdoctor-reports", "healthy") || stderr.Len() > 0 {
			t.Fatalf("lab.Reports = %s, %v (%q)", dir, err, stderr.String())
		}
		for _, p := range []string{dir, filepath.Dir(dir)} {
			if fi, err := os.Lstat(p); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
				t.Errorf("%s: %v, %v; want a directory private to root", p, fi.Mode(), err)
			}
		}
	})
}

// TestWriteOutSymlink: --json names a path where another user has put a
// symlink to a file of root's: the report is refused, the file intact.
func TestWriteOutSymlink(t *testing.T) {
	tmp := sharedTmp(t)
	target := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(target, []byte("root's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(tmp, "report.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCLI(t, "diagnose", "../../testdata/bundles/accept-overflow.json", "--json", link)
	if code != ExitFailed || !strings.Contains(stderr, "symlink of uid 65534, not followed") || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
		t.Errorf("exit %d, stderr %q; want %d and one line about the symlink", code, stderr, ExitFailed)
	}
	if b, _ := os.ReadFile(target); string(b) != "root's\n" {
		t.Errorf("written through the symlink: %q", b)
	}
}
