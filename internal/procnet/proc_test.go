package procnet

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// fixture returns a Proc reading testdata/name.
func fixture(name string) Proc {
	return Proc{FS: os.DirFS(filepath.Join("testdata", name)), Net: "net"}
}

// readFixture returns the content of testdata/name.
func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// errFS is a file system whose paths listed in errs fail with the error
// given, as a permission denied would.
type errFS struct {
	fs.FS
	errs map[string]error
}

func (f errFS) Open(name string) (fs.File, error) {
	if err, ok := f.errs[name]; ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	return f.FS.Open(name)
}

// checkErr fails t unless err wraps ErrParse exactly when wantParse.
func checkErr(t *testing.T, call string, err error, wantParse bool) {
	t.Helper()
	if got := errors.Is(err, ErrParse); got != wantParse {
		t.Errorf("%s error = %v, want wrapping ErrParse: %v", call, err, wantParse)
	}
	if !wantParse && err != nil {
		t.Errorf("%s error = %v, want nil", call, err)
	}
}

func TestDefault(t *testing.T) {
	p := Default()
	if p.Net != "thread-self/net" {
		t.Errorf("Default().Net = %q, want %q", p.Net, "thread-self/net")
	}
	if p.FS == nil {
		t.Error("Default().FS = nil, want os.DirFS(\"/proc\")")
	}
}

func TestNetPath(t *testing.T) {
	tests := []struct {
		net, want string
	}{
		{"thread-self/net", "thread-self/net/snmp"},
		{"net", "net/snmp"},
		{"", "net/snmp"},
	}
	for _, tt := range tests {
		if got := (Proc{Net: tt.net}).netPath("snmp"); got != tt.want {
			t.Errorf("Proc{Net: %q}.netPath(\"snmp\") = %q, want %q", tt.net, got, tt.want)
		}
	}
}

func TestReadErrorsUnwrapped(t *testing.T) {
	// An empty procfs: every reader must return an error that callers can
	// test with errors.Is(err, fs.ErrNotExist).
	p := Proc{FS: fstest.MapFS{}, Net: "net"}
	calls := map[string]func() error{
		"Counters":      func() error { _, err := p.Counters(); return err },
		"Sockstat":      func() error { _, err := p.Sockstat(); return err },
		"Dev":           func() error { _, err := p.Dev(); return err },
		"Softnet":       func() error { _, err := p.Softnet(); return err },
		"CPU":           func() error { _, err := p.CPU(); return err },
		"Sysctl":        func() error { _, err := p.Sysctl("net.core.somaxconn"); return err },
		"ConntrackStat": func() error { _, err := p.ConntrackStat(); return err },
		"Process":       func() error { _, err := p.Process(1); return err },
	}
	for name, call := range calls {
		err := call()
		if !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s() error = %v, want fs.ErrNotExist", name, err)
		}
		if errors.Is(err, ErrParse) {
			t.Errorf("%s() error = %v, want no ErrParse for a missing file", name, err)
		}
	}
}

func TestParseErrsMessage(t *testing.T) {
	pe := parseErrs{file: "net/x"}
	pe.addf(3, "bad %s", "thing")
	pe.addf(4, "worse")
	err := pe.err()
	if !errors.Is(err, ErrParse) {
		t.Fatalf("err = %v, want wrapping ErrParse", err)
	}
	want := "parse error: net/x line 3: bad thing (and 1 more)"
	if err.Error() != want {
		t.Errorf("err = %q, want %q", err.Error(), want)
	}
}
