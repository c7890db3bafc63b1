package symtab

import (
	"cmp"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ianlancetaylor/demangle"
)

// Object is one ELF file's functions, at the virtual addresses its
// symbol tables give them, and its loadable segments, which map a file
// offset (what /proc/PID/maps gives) to those addresses.
type Object struct {
	funcs []function
	loads []elf.ProgHeader
	// Source says where the names came from: "symtab", "dynsym",
	// "gopclntab", or "" when the file has none.
	Source string
	// Size is what the object takes in memory, as its budget counts
	// it: the tables its names are kept in, and its functions.
	Size int64
}

type function struct {
	addr, size uint64
	// name is a substring of the table it was read from, never a copy:
	// a table whose names overlap (each a suffix of the next) costs its
	// size once, not the sum of its names' lengths.
	name string
}

// funcSize is what a function takes in the budget.
const funcSize = 32

// LoadObject reads an ELF file's functions: its .symtab and .dynsym
// (a stripped C program keeps the latter: its exported functions), or,
// for a stripped Go program, its .gopclntab. r must say its size
// (*os.File, *io.SectionReader, *bytes.Reader).
//
// The file is another user's data: its headers are checked before
// debug/elf reads them, each table is read only within the file's budget
// (ObjectBudget: a table claiming more is skipped, with an error
// wrapping ErrBudget, and the next is tried), and the symbol tables and
// Go's function table are read here, names as substrings of their table
// (debug/elf's Symbols and debug/gosym copy every name, which a crafted
// table makes quadratic). A malformed file is an error, never a panic.
func LoadObject(r io.ReaderAt) (o *Object, err error) {
	defer func() {
		if p := recover(); p != nil {
			o, err = nil, fmt.Errorf("%w: malformed ELF file: %v", ErrParse, p)
		}
	}()
	return loadObject(r)
}

func loadObject(r io.ReaderAt) (*Object, error) {
	f, size, err := openELF(r)
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
	budget := int64(ObjectBudget)
	var errs []error
	if s := f.SectionByType(elf.SHT_SYMTAB); s != nil {
		n, err := o.addSymbols(f, s, size, &budget)
		errs = append(errs, err)
		if n > 0 {
			o.Source = "symtab"
		}
	}
	if s := f.SectionByType(elf.SHT_DYNSYM); s != nil {
		n, err := o.addSymbols(f, s, size, &budget)
		errs = append(errs, err)
		if n > 0 && o.Source == "" {
			o.Source = "dynsym"
		}
	}
	if o.Source != "symtab" {
		// A Go program keeps its function table in .gopclntab even
		// stripped (-ldflags=-s), as its runtime needs it.
		if n, err := o.addGo(f, size, &budget); n > 0 {
			o.Source = "gopclntab"
		} else if err != nil {
			errs = append(errs, err)
		}
	}
	o.Size = ObjectBudget - budget
	o.sortFuncs()
	return o, errors.Join(errs...)
}

// sortFuncs orders the functions by address, one per address (the
// largest: an alias's size may be 0).
func (o *Object) sortFuncs() {
	slices.SortFunc(o.funcs, func(a, b function) int {
		return cmp.Or(cmp.Compare(a.addr, b.addr), cmp.Compare(b.size, a.size))
	})
	o.funcs = slices.CompactFunc(o.funcs, func(a, b function) bool { return a.addr == b.addr })
}

// addSymbols keeps the function symbols of symbol table s that have an
// address, named from the string table it links to.
func (o *Object) addSymbols(f *elf.File, s *elf.Section, size int64, budget *int64) (int, error) {
	entsize := uint64(24) // Elf64_Sym
	if f.Class == elf.ELFCLASS32 {
		entsize = 16 // Elf32_Sym
	}
	if s.Link == 0 || int(s.Link) >= len(f.Sections) || f.Sections[s.Link].Type != elf.SHT_STRTAB {
		return 0, fmt.Errorf("%s: no string table", s.Name)
	}
	strs := f.Sections[s.Link]
	// Both tables, and a function for every entry at most, fit in what
	// is left, or neither is read.
	if need := s.Size + strs.Size + s.Size/entsize*funcSize; s.Size > uint64(*budget) || need > uint64(*budget) || need < s.Size {
		return 0, overBudget("%s and %s claim %s and %s (%s with their functions), more than the %s left of the %s netdoctor reads of one file",
			s.Name, strs.Name, mib(s.Size), mib(strs.Size), mib(need), mib(uint64(*budget)), mib(ObjectBudget))
	}
	tab, err := sectionData(s, size, budget, "symbol table")
	if err != nil {
		return 0, err
	}
	names, err := sectionData(strs, size, budget, "string table")
	if err != nil {
		return 0, err
	}
	*budget += int64(len(tab)) // the entries are not kept
	bo := order{big: f.Data == elf.ELFDATA2MSB}
	n := 0
	for off := entsize; off+entsize <= uint64(len(tab)); off += entsize {
		e := tab[off : off+entsize]
		var name uint32
		var info byte
		var shndx uint16
		var value, sz uint64
		if entsize == 24 {
			name, info, shndx = bo.u32(e[0:]), e[4], bo.u16(e[6:])
			value, sz = bo.u64(e[8:]), bo.u64(e[16:])
		} else {
			name, info, shndx = bo.u32(e[0:]), e[12], bo.u16(e[14:])
			value, sz = uint64(bo.u32(e[4:])), uint64(bo.u32(e[8:]))
		}
		t := elf.ST_TYPE(info)
		if (t != elf.STT_FUNC && t != elf.STT_GNU_IFUNC) || value == 0 || elf.SectionIndex(shndx) == elf.SHN_UNDEF {
			continue
		}
		o.funcs = append(o.funcs, function{addr: value, size: sz, name: cString(names, uint64(name))})
		n++
	}
	*budget -= int64(n) * funcSize
	if n == 0 {
		*budget += int64(len(names)) // nothing keeps the names
	}
	return n, nil
}

// order reads the file's integers out of a table kept as a string.
type order struct{ big bool }

func (o order) u16(s string) uint16 {
	if o.big {
		return uint16(s[1]) | uint16(s[0])<<8
	}
	return uint16(s[0]) | uint16(s[1])<<8
}

func (o order) u32(s string) uint32 {
	if o.big {
		return uint32(s[3]) | uint32(s[2])<<8 | uint32(s[1])<<16 | uint32(s[0])<<24
	}
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

func (o order) u64(s string) uint64 {
	if o.big {
		return uint64(o.u32(s[4:])) | uint64(o.u32(s))<<32
	}
	return uint64(o.u32(s)) | uint64(o.u32(s[4:]))<<32
}

// cString is the NUL-terminated string at off in tab, cut at maxName.
func cString(tab string, off uint64) string {
	if off >= uint64(len(tab)) {
		return ""
	}
	s := tab[off:min(uint64(len(tab)), off+maxName)]
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s
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
// parameter list; other names are returned as they are. A crafted name
// can expand exponentially (templates that repeat their arguments): the
// demangled name is bounded to 4096 characters, past which the symbol
// is shown as it is.
func Demangle(name string) string {
	if !strings.HasPrefix(name, "_Z") && !strings.HasPrefix(name, "_R") {
		return name
	}
	if d, err := demangle.ToString(name, demangle.NoParams, demangle.NoTemplateParams, demangle.MaxLength(12)); err == nil {
		return d
	}
	return name
}
