package symtab

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"github.com/netdoctor/netdoctor/internal/capped"
)

// The budget of one ELF file: what netdoctor reads of a binary another
// user controls, whatever its headers claim. A section header may claim a
// compressed section of any size (a 2 MiB file whose section names
// inflate to 2 GiB), a table may claim millions of entries, and
// debug/elf and debug/gosym allocate what they are told: the headers are
// checked against these bounds before they are handed to debug/elf, and
// every table is read within the file's budget. A file over it is skipped
// with an error that says so (ErrBudget), never half read.
const (
	// MaxSections bounds the section headers (a program has about 40; a
	// relocatable object with a section per function is not mapped to
	// run).
	MaxSections = 4096
	// maxHeaders bounds the bytes of the program and of the section
	// header tables each.
	maxHeaders = 1 << 20
	// maxShstrtab bounds the section names' table as stored: linkers
	// never compress it, so a compressed one is refused outright.
	maxShstrtab = 64 << 10
	// maxNames bounds the section names read, all together (debug/elf
	// copies each name out of the table).
	maxNames = 1 << 20
	// ObjectBudget is what one file's symbols may take: the tables read
	// (decompressed) plus the functions kept, 32 bytes each.
	ObjectBudget = 64 << 20
	// maxName cuts a symbol's name: a C++ or Rust name is rarely longer
	// than a few hundred bytes.
	maxName = 1024
	// maxBuildInfoFile is how much of an executable debug/buildinfo may
	// scan for Go's build information (which a Go program's linker puts
	// in its first data segment).
	maxBuildInfoFile = 1 << 30
)

// ErrBudget is wrapped by the error of a file whose headers claim more
// than netdoctor reads: it was skipped. It wraps capped.ErrTooLarge.
var ErrBudget = fmt.Errorf("over netdoctor's budget, skipped: %w", capped.ErrTooLarge)

func overBudget(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrBudget)
}

// mib words a byte count for the errors.
func mib(n uint64) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%d bytes", n)
}

// readerSize is the size of the file r reads.
func readerSize(r io.ReaderAt) (int64, error) {
	switch f := r.(type) {
	case interface{ Size() int64 }:
		return f.Size(), nil
	case interface{ Stat() (fs.FileInfo, error) }:
		fi, err := f.Stat()
		if err != nil {
			return 0, err
		}
		return fi.Size(), nil
	}
	return 0, errors.New("a file of unknown size")
}

// checkELF reads an ELF file's headers as debug/elf.NewFile will, and
// refuses one whose tables would make it allocate more than the budget:
// more than MaxSections sections (the extended numbering, for 65 280 and
// more, included), header tables over maxHeaders, a section-name table
// compressed or over maxShstrtab, or names longer than maxNames together
// (debug/elf copies each, and overlapping names cost their length each).
// Past it, NewFile allocates little: the headers and the names.
func checkELF(r io.ReaderAt, size int64) error {
	var ident [elf.EI_NIDENT]byte
	if _, err := r.ReadAt(ident[:], 0); err != nil {
		return fmt.Errorf("not an ELF file: %w", err)
	}
	if string(ident[:4]) != elf.ELFMAG {
		return errors.New("not an ELF file")
	}
	var bo binary.ByteOrder
	switch elf.Data(ident[elf.EI_DATA]) {
	case elf.ELFDATA2LSB:
		bo = binary.LittleEndian
	case elf.ELFDATA2MSB:
		bo = binary.BigEndian
	default:
		return errors.New("ELF file of unknown byte order")
	}
	var (
		phoff, shoff                                 uint64
		phentsize, phnum, shentsize, shnum, shstrndx uint64
		is64                                         bool
	)
	switch elf.Class(ident[elf.EI_CLASS]) {
	case elf.ELFCLASS32:
		var h [52]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return fmt.Errorf("ELF header: %w", err)
		}
		phoff, shoff = uint64(bo.Uint32(h[28:])), uint64(bo.Uint32(h[32:]))
		phentsize, phnum = uint64(bo.Uint16(h[42:])), uint64(bo.Uint16(h[44:]))
		shentsize, shnum, shstrndx = uint64(bo.Uint16(h[46:])), uint64(bo.Uint16(h[48:])), uint64(bo.Uint16(h[50:]))
	case elf.ELFCLASS64:
		var h [64]byte
		if _, err := r.ReadAt(h[:], 0); err != nil {
			return fmt.Errorf("ELF header: %w", err)
		}
		phoff, shoff = bo.Uint64(h[32:]), bo.Uint64(h[40:])
		phentsize, phnum = uint64(bo.Uint16(h[54:])), uint64(bo.Uint16(h[56:]))
		shentsize, shnum, shstrndx = uint64(bo.Uint16(h[58:])), uint64(bo.Uint16(h[60:])), uint64(bo.Uint16(h[62:]))
		is64 = true
	default:
		return errors.New("ELF file of unknown class")
	}
	if phnum > MaxSections || phnum*phentsize > maxHeaders {
		return overBudget("%d program headers of %d bytes", phnum, phentsize)
	}
	if phnum > 0 && (phoff > uint64(size) || phnum*phentsize > uint64(size)-phoff) {
		return errors.New("malformed ELF file: its program headers are not in it")
	}
	if shoff == 0 {
		return nil // no sections: nothing NewFile reads beyond the headers
	}
	if shnum == 0 {
		// The extended numbering: 65 280 sections or more.
		return overBudget("more than %d sections", MaxSections)
	}
	if shnum > MaxSections || shnum*shentsize > maxHeaders {
		return overBudget("%d sections of %d bytes", shnum, shentsize)
	}
	want := uint64(40)
	if is64 {
		want = 64
	}
	if shentsize < want || shoff > uint64(size) || shnum*shentsize > uint64(size)-shoff {
		return errors.New("malformed ELF file: its section headers are not in it")
	}
	if shstrndx == 0 || shstrndx >= shnum {
		return nil // no names: NewFile reads no table
	}
	hdrs := make([]byte, shnum*shentsize)
	if _, err := r.ReadAt(hdrs, int64(shoff)); err != nil {
		return fmt.Errorf("ELF section headers: %w", err)
	}
	// The section-name table: its flags, offset and size.
	sh := hdrs[shstrndx*shentsize:]
	var flags, off, n uint64
	if is64 {
		flags, off, n = bo.Uint64(sh[8:]), bo.Uint64(sh[24:]), bo.Uint64(sh[32:])
	} else {
		flags, off, n = uint64(bo.Uint32(sh[8:])), uint64(bo.Uint32(sh[16:])), uint64(bo.Uint32(sh[20:]))
	}
	if elf.SectionFlag(flags)&elf.SHF_COMPRESSED != 0 {
		return overBudget("its section names' table is compressed (no linker writes one so)")
	}
	if n > maxShstrtab {
		return overBudget("its section names' table claims %s, more than %s", mib(n), mib(maxShstrtab))
	}
	if off > uint64(size) || n > uint64(size)-off {
		return errors.New("malformed ELF file: its section names' table is not in it")
	}
	names := make([]byte, n)
	if _, err := r.ReadAt(names, int64(off)); err != nil {
		return fmt.Errorf("ELF section names: %w", err)
	}
	total := uint64(0)
	for i := range shnum {
		at := uint64(bo.Uint32(hdrs[i*shentsize:]))
		if at >= n {
			continue // NewFile refuses the file
		}
		end := uint64(len(names))
		if j := bytes.IndexByte(names[at:], 0); j >= 0 {
			end = at + uint64(j)
		}
		if total += end - at; total > maxNames {
			return overBudget("its section names take more than %s", mib(maxNames))
		}
	}
	return nil
}

// openELF opens an ELF file of another user's within the budget: its
// headers checked (checkELF), then parsed by debug/elf.
func openELF(r io.ReaderAt) (*elf.File, int64, error) {
	size, err := readerSize(r)
	if err != nil {
		return nil, 0, err
	}
	if err := checkELF(r, size); err != nil {
		return nil, 0, err
	}
	f, err := elf.NewFile(r)
	if err != nil {
		return nil, 0, err
	}
	return f, size, nil
}

// sectionData reads section s of a file of size bytes, decompressed,
// when its size fits in what is left of budget (which it then takes), as
// one string: the names in it are kept as substrings, never copied one by
// one. A section compressed the old way (.zdebug, its size in its first
// bytes, which debug/elf reads only when opening it) is not read.
func sectionData(s *elf.Section, size int64, budget *int64, what string) (string, error) {
	switch {
	case s.Type == elf.SHT_NOBITS:
		return "", fmt.Errorf("%s (%s) has no data in the file", what, s.Name)
	case strings.HasPrefix(s.Name, ".zdebug"):
		return "", fmt.Errorf("%s (%s) is compressed the old way, not read", what, s.Name)
	case s.Flags&elf.SHF_COMPRESSED == 0 && (s.Offset > uint64(size) || s.FileSize > uint64(size)-s.Offset):
		return "", fmt.Errorf("malformed ELF file: %s (%s) is not in it", what, s.Name)
	case s.Size > uint64(*budget):
		return "", overBudget("%s (%s) claims %s, more than the %s left of the %s netdoctor reads of one file", what, s.Name, mib(s.Size), mib(uint64(*budget)), mib(ObjectBudget))
	}
	*budget -= int64(s.Size)
	var b strings.Builder
	b.Grow(int(s.Size))
	if _, err := io.CopyN(&b, s.Open(), int64(s.Size)); err != nil {
		return "", fmt.Errorf("%s (%s): %w", what, s.Name, err)
	}
	return b.String(), nil
}

// ReadBuildInfo reads a Go program's build information (debug/buildinfo)
// from an executable another user may control, within the budget: its
// ELF headers checked first (checkELF: debug/buildinfo opens the file
// with debug/elf, which decompresses a compressed section-name table
// whatever size it claims), and no more than its first
// maxBuildInfoFile bytes searched. A file that is no ELF is not read
// (debug/buildinfo would parse PE, Mach-O and others, each with its own
// allocations). A malformed file is an error, never a panic.
func ReadBuildInfo(r io.ReaderAt) (bi *buildinfo.BuildInfo, err error) {
	defer func() {
		if p := recover(); p != nil {
			bi, err = nil, fmt.Errorf("%w: malformed binary: %v", ErrParse, p)
		}
	}()
	size, err := readerSize(r)
	if err != nil {
		return nil, err
	}
	if err := checkELF(r, size); err != nil {
		return nil, err
	}
	return buildinfo.Read(io.NewSectionReader(r, 0, min(size, maxBuildInfoFile)))
}
