package symtab

import (
	"bytes"
	"compress/zlib"
	"debug/elf"
	"debug/gosym"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"

	"github.com/netdoctor/netdoctor/internal/symtab/symtabtest"
)

// tiny is a small executable with a Go function table, a symbol table
// and their string table, as symtabtest builds them.
func tiny() []byte {
	funcs := []symtabtest.Func{{Name: "main.main", Entry: 0x401000, Size: 0x40}, {Name: "main.serve", Entry: 0x401040, Size: 0x80}}
	sym, str := symtabtest.Symbols(funcs, 1)
	return symtabtest.Build([]symtabtest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x401000, Data: make([]byte, 0xc0)},
		{Name: ".gopclntab", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC, Addr: 0x402000, Data: symtabtest.Pclntab(0x401000, funcs)},
		{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 4, Entsize: 24, Data: sym},
		{Name: ".strtab", Type: elf.SHT_STRTAB, Data: str},
	})
}

func TestLoadObjectTiny(t *testing.T) {
	o, err := LoadObject(bytes.NewReader(tiny()))
	if err != nil {
		t.Fatal(err)
	}
	if o.Source != "symtab" || o.Len() != 2 {
		t.Fatalf("source %q, %d functions", o.Source, o.Len())
	}
	if name, ok := o.Lookup(0x401050); name != "main.serve" || !ok {
		t.Errorf("Lookup(0x401050) = %q %v", name, ok)
	}
	// Its Go function table alone, as a stripped Go program has it.
	funcs, err := goFuncs(string(symtabtest.Pclntab(0x401000, []symtabtest.Func{{Name: "a", Entry: 0x401000, Size: 8}, {Name: "b", Entry: 0x401008, Size: 8}})), 0x401000, ObjectBudget)
	if err != nil || len(funcs) != 2 || funcs[1] != (function{addr: 0x401008, size: 8, name: "b"}) {
		t.Errorf("goFuncs: %+v, %v", funcs, err)
	}
}

// TestGoFuncsAgreesWithGosym: the function table read here names every
// function as debug/gosym does, in real Go programs: this test's binary
// and the toolchain's own, when there.
func TestGoFuncsAgreesWithGosym(t *testing.T) {
	exe, _ := os.Executable()
	files := []string{exe}
	if p, err := exec.LookPath("go"); err == nil {
		files = append(files, p)
	}
	for _, p := range files {
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		pcln, text := f.Section(".gopclntab"), f.Section(".text")
		data, err := pcln.Data()
		if err != nil {
			t.Fatal(err)
		}
		tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
		if err != nil {
			t.Fatal(err)
		}
		got, err := goFuncs(string(data), text.Addr, ObjectBudget)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if len(got) != len(tab.Funcs) {
			t.Fatalf("%s: %d functions, gosym %d", p, len(got), len(tab.Funcs))
		}
		for i, fn := range tab.Funcs {
			if g := got[i]; g.addr != fn.Entry || g.addr+g.size != fn.End || g.name != fn.Name {
				t.Fatalf("%s: function %d: %#x+%d %q, gosym %#x-%#x %q", p, i, g.addr, g.size, g.name, fn.Entry, fn.End, fn.Name)
			}
		}
		f.Close()
	}
}

// TestSymbolsAgreeWithDebugELF: the symbol tables read here give the
// functions debug/elf's Symbols and DynamicSymbols give, in real
// programs and libraries (a Go program's .symtab, nginx's and libc's
// .dynsym), when there.
func TestSymbolsAgreeWithDebugELF(t *testing.T) {
	exe, _ := os.Executable()
	gobin, _ := exec.LookPath("go")
	for _, p := range []string{exe, gobin, "/usr/sbin/nginx", "/usr/lib/x86_64-linux-gnu/libc.so.6"} {
		if !fileExists(p) {
			continue
		}
		f, err := elf.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		var want []function
		for _, get := range []func() ([]elf.Symbol, error){f.Symbols, f.DynamicSymbols} {
			syms, _ := get()
			for _, s := range syms {
				typ := elf.ST_TYPE(s.Info)
				if (typ == elf.STT_FUNC || typ == elf.STT_GNU_IFUNC) && s.Value != 0 && s.Section != elf.SHN_UNDEF {
					want = append(want, function{addr: s.Value, size: s.Size, name: s.Name[:min(len(s.Name), maxName)]})
				}
			}
		}
		f.Close()
		fh, _ := os.Open(p)
		o, err := LoadObject(fh)
		fh.Close()
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if o.Source == "gopclntab" {
			continue
		}
		ref := &Object{funcs: want}
		ref.sortFuncs()
		t.Logf("%s: %s, %d functions, %d bytes", p, o.Source, len(o.funcs), o.Size)
		if !slices.Equal(o.funcs, ref.funcs) {
			t.Errorf("%s: %d functions, debug/elf %d", p, len(o.funcs), len(ref.funcs))
		}
		if o.Size <= 0 || o.Size > ObjectBudget {
			t.Errorf("%s: size %d", p, o.Size)
		}
	}
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// TestCraftedHeaders: files whose headers claim what netdoctor would
// not read are skipped, with an error that says so, after allocating
// little, whatever they claim: a section-name table or symbol table that
// inflates to 2 GiB, more sections than the budget, a string table of a
// gigabyte, a Go function table claiming millions of functions, a
// symbol table whose names all overlap.
func TestCraftedHeaders(t *testing.T) {
	const claim = 2 << 30
	z := symtabtest.ZlibZeros(4 << 20) // a real bomb, 4 MiB of it
	small := func(secs ...symtabtest.Section) []byte { return symtabtest.Build(secs) }
	text := symtabtest.Section{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x401000, Data: make([]byte, 64)}
	sym, str := symtabtest.Symbols([]symtabtest.Func{{Name: "f", Entry: 0x401000, Size: 8}}, 1)
	exe, _ := os.Executable()
	self, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	names, err := symtabtest.CompressedNames(self, claim)
	if err != nil {
		t.Fatal(err)
	}
	overlapping := make([]byte, 24, 24+24*200000)
	for range 200000 {
		var e [24]byte
		e[4] = byte(elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC))
		e[6], e[8] = 1, 1 // section 1, address 1
		overlapping = append(overlapping, e[:]...)
	}
	pcln := symtabtest.Pclntab(0x401000, []symtabtest.Func{{Name: "f", Entry: 0x401000, Size: 8}})
	pcln[8] = 0xff // nfunc: 255, in a table of two entries
	pcln[9] = 0xff
	for _, tt := range []struct {
		name   string
		file   []byte
		budget bool // the error says it is over budget
	}{
		{"section names compressed, 2 GiB claimed", names, true},
		{"symbol table compressed, 2 GiB claimed", small(text, symtabtest.Section{Name: ".symtab", Type: elf.SHT_SYMTAB, Flags: elf.SHF_COMPRESSED, Link: 3, Entsize: 24, Data: symtabtest.Compressed(claim, z)},
			symtabtest.Section{Name: ".strtab", Type: elf.SHT_STRTAB, Data: str}), true},
		{"string table compressed, 2 GiB claimed", small(text, symtabtest.Section{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 3, Entsize: 24, Data: sym},
			symtabtest.Section{Name: ".strtab", Type: elf.SHT_STRTAB, Flags: elf.SHF_COMPRESSED, Data: symtabtest.Compressed(claim, z)}), true},
		{"gopclntab compressed, 2 GiB claimed", small(text, symtabtest.Section{Name: ".gopclntab", Type: elf.SHT_PROGBITS, Flags: elf.SHF_COMPRESSED, Data: symtabtest.Compressed(claim, z)}), true},
		{"string table of a GiB on disk", small(text, symtabtest.Section{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 3, Entsize: 24, Data: sym},
			symtabtest.Section{Name: ".strtab", Type: elf.SHT_STRTAB, Data: str, Size: 1 << 30}), false},
		{"gopclntab claiming 65535 functions", small(text, symtabtest.Section{Name: ".gopclntab", Type: elf.SHT_PROGBITS, Data: pcln}), false},
		{"overlapping names", small(text, symtabtest.Section{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 3, Entsize: 24, Data: overlapping},
			symtabtest.Section{Name: ".strtab", Type: elf.SHT_STRTAB, Data: append(bytes.Repeat([]byte("x"), 1<<20), 0)}), false},
		{"symbol and string tables at one offset", small(text, symtabtest.Section{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 3, Entsize: 24, Data: sym},
			symtabtest.Section{Name: ".strtab", Type: elf.SHT_STRTAB, Offset: 64, Size: 4096}), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			n := allocated(func() { _, err = LoadObject(bytes.NewReader(tt.file)) })
			if tt.budget && !errors.Is(err, ErrBudget) {
				t.Errorf("LoadObject: %v, want an error wrapping ErrBudget", err)
			}
			if max := uint64(len(tt.file)) + 48<<20; n > max {
				t.Errorf("LoadObject allocated %d MiB", n>>20)
			}
			n = allocated(func() { _, err = ReadBuildInfo(bytes.NewReader(tt.file)) })
			if tt.name == "section names compressed, 2 GiB claimed" && !errors.Is(err, ErrBudget) {
				t.Errorf("ReadBuildInfo: %v, want an error wrapping ErrBudget", err)
			}
			if max := uint64(len(tt.file)) + 16<<20; n > max {
				t.Errorf("ReadBuildInfo allocated %d MiB", n>>20)
			}
		})
	}
	// Too many sections: the count is checked before anything is read.
	f := tiny()
	f[60], f[61] = 0xff, 0x7f // e_shnum 32767
	if _, err := LoadObject(bytes.NewReader(f)); !errors.Is(err, ErrBudget) {
		t.Errorf("32767 sections: %v", err)
	}
	f[60], f[61] = 0, 0 // the extended numbering: 65 280 or more
	if _, err := LoadObject(bytes.NewReader(f)); !errors.Is(err, ErrBudget) {
		t.Errorf("extended section numbering: %v", err)
	}
}

// TestZlibZeros: the bomb the tests use inflates to what it says.
func TestZlibZeros(t *testing.T) {
	zr, err := zlib.NewReader(bytes.NewReader(symtabtest.ZlibZeros(3 << 20)))
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, zr)
	if err != nil || n != 3<<20 {
		t.Errorf("inflated to %d bytes, %v", n, err)
	}
}

// FuzzLoadObject: an ELF file another user controls, read for its
// functions (symbol tables, Go's function table, compressed sections)
// and its build information: never a panic, never more than the budget.
func FuzzLoadObject(f *testing.F) {
	f.Add(tiny())
	sym, str := symtabtest.Symbols([]symtabtest.Func{{Name: "f", Entry: 0x401000, Size: 8}}, 1)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(str)
	zw.Close()
	f.Add(symtabtest.Build([]symtabtest.Section{
		{Name: ".text", Type: elf.SHT_PROGBITS, Flags: elf.SHF_ALLOC | elf.SHF_EXECINSTR, Addr: 0x401000, Data: make([]byte, 16)},
		{Name: ".symtab", Type: elf.SHT_SYMTAB, Link: 3, Entsize: 24, Data: sym},
		{Name: ".strtab", Type: elf.SHT_STRTAB, Flags: elf.SHF_COMPRESSED, Data: symtabtest.Compressed(uint64(len(str)), z.Bytes())},
	}))
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var o *Object
		var err error
		n := allocated(func() { o, err = LoadObject(bytes.NewReader(b)) })
		if err == nil && o == nil {
			t.Fatal("no object and no error")
		}
		if n > uint64(len(b))+2*ObjectBudget {
			t.Fatalf("allocated %d MiB for a file of %d bytes", n>>20, len(b))
		}
		if err == nil {
			o.Lookup(0x401000)
			o.Vaddr(0x1000)
		}
		ReadBuildInfo(bytes.NewReader(b))
	})
}
