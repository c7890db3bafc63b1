package symtab

import (
	"os"
	"testing"
)

// BenchmarkKallsyms is what naming kernel addresses costs once per
// profile: reading and sorting /proc/kallsyms (~120 000 text symbols on
// 6.18).
//
//	go test -run - -bench Kallsyms ./internal/symtab
func BenchmarkKallsyms(b *testing.B) {
	for b.Loop() {
		if _, err := LoadKernel(os.DirFS("/")); err != nil {
			b.Skip(err)
		}
	}
}

// BenchmarkLoadObject is reading a Go binary's functions (this test's).
func BenchmarkLoadObject(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		f, err := os.Open(exe)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := LoadObject(f); err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

// BenchmarkParseKallsyms is the parsing alone, of a copy read once.
func BenchmarkParseKallsyms(b *testing.B) {
	buf, err := os.ReadFile("/proc/kallsyms")
	if err != nil {
		b.Skip(err)
	}
	for b.Loop() {
		ParseKallsyms(buf)
	}
}
