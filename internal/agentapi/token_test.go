package agentapi

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const token = "0123456789abcdefghij"

// TestReadTokenSecretVolume: a Kubernetes Secret volume names its files
// through two symlinks (token → ..data/token, ..data → ..TIMESTAMP); the
// agent reads its token from there.
func TestReadTokenSecretVolume(t *testing.T) {
	dir := t.TempDir()
	ts := filepath.Join(dir, "..2026_11_24_09_00_00.123")
	if err := os.Mkdir(ts, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ts, "token"), []byte(token+"\n"), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(ts), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..data/token", filepath.Join(dir, "token")); err != nil {
		t.Fatal(err)
	}
	got, err := ReadToken(filepath.Join(dir, "token"))
	if err != nil || string(got) != token {
		t.Fatalf("ReadToken = %q, %v; want %q", got, err, token)
	}
}

// TestReadTokenRefuses: what another user could have pointed or read is
// no token.
func TestReadTokenRefuses(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", token+"\n", 0o600)
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink("loop", loop); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		write("open", token, 0o644):          "can be read or written by others",
		write("short", "abc", 0o600):         "at least 16 characters",
		write("spaces", token+" x", 0o600):   "white space",
		filepath.Join(dir, "none"):           "no such file",
		loop:                                 "too many levels of symlinks",
		dir:                                  "not a regular file",
		filepath.Join(dir, "good", "beyond"): "not a directory",
	}
	if os.Geteuid() == 0 {
		// A symlink another user owns, to a good token: refused for
		// the link, not the file.
		theirs := filepath.Join(dir, "theirs")
		if err := os.Symlink(good, theirs); err != nil {
			t.Fatal(err)
		}
		if err := os.Lchown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[theirs] = "symlink " + theirs + " of uid 65534"
	} else {
		t.Log("not root: the symlink of another user is not tried")
	}
	for path, want := range cases {
		if got, err := ReadToken(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadToken(%s) = %q, %v; want an error with %q", filepath.Base(path), got, err, want)
		}
	}
	if got, err := ReadToken(good); err != nil || string(got) != token {
		t.Errorf("ReadToken(good) = %q, %v", got, err)
	}
}
