package symtab

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKallsyms(t *testing.T) {
	k, err := ParseKallsyms(readFixture(t, "kallsyms"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		addr       uint64
		name, mod  string
		wantLookup bool
	}{
		{0xffffffff82005930 + 0x3f, "inet_hash_connect", "", true},
		{0xffffffff82002d30 + 0x100, "__inet_check_established", "", true},
		{0xffffffff822010b0, "native_queued_spin_lock_slowpath", "", true},
		{0xffffffff81000000, "srso_alias_untrain_ret", "", true}, // the first of four names there
		{0xffffffffc0201000 + 8, "ftrace_trampoline", "__builtin__ftrace", true},
		{0x1000, "", "", false},
	} {
		name, mod, ok := k.Lookup(tt.addr)
		if name != tt.name || mod != tt.mod || ok != tt.wantLookup {
			t.Errorf("Lookup(%#x) = %q %q %v, want %q %q %v", tt.addr, name, mod, ok, tt.name, tt.mod, tt.wantLookup)
		}
	}
}

func TestKallsymsRestricted(t *testing.T) {
	// As a user without CAP_SYSLOG reads it with perf_event_paranoid 2.
	k, err := ParseKallsyms(readFixture(t, "kallsyms.restricted"))
	if err == nil || !strings.Contains(err.Error(), "kptr_restrict") || k.Len() != 0 {
		t.Errorf("%d symbols, err %v: want none and a word on kptr_restrict", k.Len(), err)
	}
	k, err = ParseKallsyms(readFixture(t, "kallsyms.truncated"))
	if !errors.Is(err, ErrParse) || k.Len() == 0 {
		t.Errorf("truncated: %d symbols, err %v: want the complete lines and a parse error", k.Len(), err)
	}
}

func TestParseMaps(t *testing.T) {
	ms, err := ParseMaps(readFixture(t, "maps"))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 38 {
		t.Fatalf("%d mappings, want 38", len(ms))
	}
	text := ms[1]
	if !text.Exec() || !text.File() || text.Path != "/usr/bin/cat" || text.Offset != 0x2000 || text.Major != 0xfe || text.Inode == 0 {
		t.Errorf("cat's text: %+v", text)
	}
	last := ms[len(ms)-1]
	if last.Path != "[vsyscall]" || last.File() || !last.Exec() {
		t.Errorf("vsyscall: %+v", last)
	}
	// A binary deleted while it runs, with a space in its path.
	ms, err = ParseMaps(readFixture(t, "maps.deleted"))
	if err != nil {
		t.Fatal(err)
	}
	if m := ms[1]; m.Path != "/tmp/cpuexp/my sleep" || !m.Deleted || !m.Exec() {
		t.Errorf("deleted: %+v", m)
	}
	ms, err = ParseMaps([]byte("55b8c3f56000-55b8c3f58000 r--p 00000000 fe:00 9994254   /bin/x\n55b8c3f58000-55b8c3f5d000 r-xp 0000"))
	if !errors.Is(err, ErrParse) || len(ms) != 1 {
		t.Errorf("truncated: %v, %v", ms, err)
	}
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"kallsyms", "kallsyms.restricted", "kallsyms.truncated", "maps", "maps.deleted"} {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ms, err := ParseMaps(b)
		if err != nil && !errors.Is(err, ErrParse) {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.End < m.Start {
				t.Fatalf("mapping ends before it starts: %+v", m)
			}
		}
		k, _ := ParseKallsyms(b)
		k.Lookup(0xffffffff81000000)
	})
}
