package durable

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestWriteFile: a new file and a replaced one get the content, the mode
// asked for (not the temporary file's 0600) and, as root, the owner; no
// temporary file is left beside them.
func TestWriteFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nginx.conf")
	if err := WriteFile(path, []byte("one\n"), 0o644, Keep, Keep); err != nil {
		t.Fatal(err)
	}
	uid, gid := Keep, Keep
	if os.Geteuid() == 0 {
		uid, gid = 65534, 65534
	}
	if err := WriteFile(path, []byte("two\n"), 0o640, uid, gid); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "two\n" {
		t.Fatalf("content %q, %v", b, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", st.Mode().Perm())
	}
	if sys := st.Sys().(*syscall.Stat_t); uid != Keep && (int(sys.Uid) != uid || int(sys.Gid) != gid) {
		t.Errorf("owner %d:%d, want %d:%d", sys.Uid, sys.Gid, uid, gid)
	}
	wantOnly(t, dir, "nginx.conf")
}

// TestWriteFileFails: a path that cannot be replaced (a directory stands
// there) fails with the path named, keeps what was there and leaves no
// temporary file; a missing directory fails too.
func TestWriteFileFails(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "conf.d")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(target, "keep"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	err := WriteFile(target, []byte("x"), 0o644, Keep, Keep)
	if err == nil || !strings.Contains(err.Error(), target) {
		t.Fatalf("over a directory: %v", err)
	}
	if st, err := os.Stat(target); err != nil || !st.IsDir() {
		t.Errorf("the directory was replaced: %v", err)
	}
	wantOnly(t, dir, "conf.d")
	if err := WriteFile(filepath.Join(dir, "gone", "f"), []byte("x"), 0o644, Keep, Keep); err == nil {
		t.Error("a missing directory: no error")
	}
	if err := SyncDir(filepath.Join(dir, "gone")); err == nil {
		t.Error("SyncDir of a missing directory: no error")
	}
}

func wantOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range es {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}
