package journal

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type testJournal struct {
	Owner
	Entries []string `json:"entries"`
}

func TestSaveRead(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "20250101T000000Z-1.json")
	want := testJournal{Owner: Owner{PID: 42, Start: 7}, Entries: []string{"sysctl", "file"}}
	if err := Save(path, want); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The owner's fields sit at the top level, as tune's version-1
	// journals have them.
	const text = "{\n  \"pid\": 42,\n  \"start_time\": 7,\n  \"entries\": [\n    \"sysctl\",\n    \"file\"\n  ]\n}\n"
	if string(b) != text {
		t.Errorf("saved:\n%s\nwant:\n%s", b, text)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, %v; want 0600", st.Mode().Perm(), err)
	}
	var got testJournal
	if err := Read(path, &got); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read mismatch (-want +got):\n%s", diff)
	}

	garbage := filepath.Join(dir, "garbage.json")
	os.WriteFile(garbage, []byte("not json"), 0o600)
	if err := Read(garbage, &got); !errors.Is(err, ErrFormat) || err.Error()[:len(garbage)] != garbage {
		t.Errorf("Read(garbage) = %v, want ErrFormat naming the file", err)
	}
	if err := Read(filepath.Join(dir, "missing.json"), &got); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
	os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600)
	os.Mkdir(filepath.Join(dir, "old.json"), 0o700)
	// Sorted by name, *.json files only: "2025…" before "garbage".
	if paths, err := List(dir); err != nil || !slices.Equal(paths, []string{path, garbage}) {
		t.Errorf("List = %v, %v; want %v", paths, err, []string{path, garbage})
	}
	if paths, err := List(filepath.Join(dir, "none")); paths != nil || err != nil {
		t.Errorf("List(missing dir) = %v, %v", paths, err)
	}
}
