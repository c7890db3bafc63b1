package symtab

import (
	"cmp"
	"debug/elf"
	"debug/gosym"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// maxSection bounds the bytes read of one symbol table, string table or
// pclntab: a 2 GiB debug binary is symbolized from its dynamic symbols,
// if it has them, not read into memory whole.
const maxSection = 128 << 20

// Object is one ELF file's functions, at the virtual addresses its
// symbol tables give them, and its loadable segments, which map a file
// offset (what /proc/PID/maps gives) to those addresses.
type Object struct {
	funcs []function
	loads []elf.ProgHeader
	// Source says where the names came from: "symtab", "dynsym",
	// "gopclntab", or "" when the file has none.
	Source string
}

type function struct {
	addr, size uint64
	name       string
}

// LoadObject reads an ELF file's functions: its .symtab and .dynsym
// (a stripped C program keeps the latter: its exported functions), or,
// for a stripped Go program, its .gopclntab.
//
// The file is another user's data: a malformed one is an error, never a
// panic of netdoctor's (debug/elf and debug/gosym trust their input more
// than a profiler can).
func LoadObject(r io.ReaderAt) (o *Object, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, err = nil, fmt.Errorf("%w: malformed ELF file: %v", ErrParse, p)
		}
	}()
	return loadObject(r)
}

func loadObject(r io.ReaderAt) (*Object, error) {
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	o := &Object{}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			o.loads = append(o.loads, p.ProgHeader)
		}
	}
	var errs []error
	if s := f.Section(".symtab"); s != nil && s.Size <= maxSection {
		syms, err := f.Symbols()
		errs = append(errs, err)
		if o.add(syms) > 0 {
			o.Source = "symtab"
		}
	}
	if s := f.Section(".dynsym"); s != nil && s.Size <= maxSection {
		syms, err := f.DynamicSymbols()
		if !errors.Is(err, elf.ErrNoSymbols) {
			errs = append(errs, err)
		}
		if o.add(syms) > 0 && o.Source == "" {
			o.Source = "dynsym"
		}
	}
	if o.Source != "symtab" {
		// A Go program keeps its function table in .gopclntab even
		// stripped (-ldflags=-s), as its runtime needs it.
		if n, err := o.addGo(f); n > 0 {
			o.Source = "gopclntab"
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	slices.SortFunc(o.funcs, func(a, b function) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(b.size, a.size))
	})
	o.funcs = slices.CompactFunc(o.funcs, func(a, b function) bool { return a.addr == b.addr })
	return o, errors.Join(errs...)
}

// add keeps the function symbols that have an address.
func (o *Object) add(syms []elf.Symbol) int {
	n := 0
	for _, s := range syms {
		t := elf.ST_TYPE(s.Info)
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || s.Value == 0 || s.Section == elf.SHN_UNDEF {
			continue
		}
		o.funcs = append(o.funcs, function{addr: s.Value, size: s.Size, name: s.Name})
		n++
	}
	return n
}

// addGo reads a Go program's functions from .gopclntab.
func (o *Object) addGo(f *elf.File) (int, error) {
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return 0, nil
	}
	if pcln.Size > maxSection {
		return 0, fmt.Errorf("gopclntab: %d bytes, more than %d", pcln.Size, maxSection)
	}
	data, err := pcln.Data()
	if err != nil {
		return 0, fmt.Errorf("gopclntab: %w", err)
	}
	tab, err := gosym.NewTable(nil, gosym.NewLineTable(data, text.Addr))
	if err != nil {
		return 0, fmt.Errorf("gopclntab: %w", err)
	}
	for _, fn := range tab.Funcs {
		o.funcs = append(o.funcs, function{addr: fn.Entry, size: fn.End - fn.Entry, name: fn.Name})
	}
	return len(tab.Funcs), nil
}

// Len is the number of functions known.
func (o *Object) Len() int { return len(o.funcs) }

// Vaddr is the virtual address the ELF file gives to a byte at offset
// off in the file: through the loadable segment holding it. A position
// independent executable or a library is mapped anywhere; its maps line
// says where its file offsets are, and this says which function they are.
func (o *Object) Vaddr(off uint64) (uint64, bool) {
	for _, p := range o.loads {
		if off >= p.Off && off < p.Off+p.Filesz {
			return off - p.Off + p.Vaddr, true
		}
	}
	return 0, false
}

// Lookup names the function holding vaddr: the last one starting at or
// below it, when vaddr is within its size (or it has none).
func (o *Object) Lookup(vaddr uint64) (string, bool) {
	i, found := slices.BinarySearchFunc(o.funcs, vaddr, func(f function, a uint64) int { return cmp.Compare(f.addr, a) })
	if !found {
		if i == 0 {
			return "", false
		}
		i--
	}
	f := o.funcs[i]
	if f.size > 0 && vaddr >= f.addr+f.size {
		return "", false
	}
	return Demangle(f.name), true
}

// Demangle turns a C++ or Rust symbol into its source name, without the
// parameter list; other names are returned as they are.
func Demangle(name string) string {
	if !strings.HasPrefix(name, "_Z") && !strings.HasPrefix(name, "_R") {
		return name
	}
	if d, err := demangle.ToString(name, demangle.NoParams, demangle.NoTemplateParams); err == nil {
		return d
	}
	return name
}
