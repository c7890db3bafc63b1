// Package symtabtest makes the ELF files another user could hand
// netdoctor, for the tests of the parsers that read them (symtab's, the
// runtime's build information) and for the fuzzers' seeds: small files
// built section by section, with a Go function table or symbols, and
// real executables whose section headers claim what they do not hold (a
// section-name table that inflates to gigabytes).
package symtabtest

import (
	"bytes"
	"compress/flate"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
)

// Section is one section of a file Build makes.
type Section struct {
	Name    string
	Type    elf.SectionType
	Flags   elf.SectionFlag
	Addr    uint64
	Link    uint32
	Entsize uint64
	Data    []byte
	// Size, when not 0, is the size the header claims instead of
	// len(Data); Offset, when not 0, the offset it claims.
	Size, Offset uint64
}

// Build makes a 64-bit little-endian executable: its ELF header, one
// loadable segment over the whole file at address 0x400000, the
// sections' data in order, the section names' table last, then the
// section headers.
func Build(secs []Section) []byte {
	const ehsize, phsize, shsize = 64, 56, 64
	var body bytes.Buffer
	body.Write(make([]byte, ehsize+phsize))
	offs := make([]uint64, len(secs))
	for i, s := range secs {
		for body.Len()%8 != 0 {
			body.WriteByte(0)
		}
		offs[i] = uint64(body.Len())
		body.Write(s.Data)
	}
	names := []byte{0}
	at := make([]uint32, len(secs)+1)
	for i, s := range secs {
		at[i] = uint32(len(names))
		names = append(append(names, s.Name...), 0)
	}
	at[len(secs)] = uint32(len(names))
	names = append(names, ".shstrtab\x00"...)
	shstrOff := uint64(body.Len())
	body.Write(names)
	for body.Len()%8 != 0 {
		body.WriteByte(0)
	}
	shoff := uint64(body.Len())
	le := binary.LittleEndian
	sh := func(name uint32, typ elf.SectionType, flags elf.SectionFlag, addr, off, size uint64, link uint32, entsize uint64) {
		var h [shsize]byte
		le.PutUint32(h[0:], name)
		le.PutUint32(h[4:], uint32(typ))
		le.PutUint64(h[8:], uint64(flags))
		le.PutUint64(h[16:], addr)
		le.PutUint64(h[24:], off)
		le.PutUint64(h[32:], size)
		le.PutUint32(h[40:], link)
		le.PutUint64(h[48:], 1)
		le.PutUint64(h[56:], entsize)
		body.Write(h[:])
	}
	sh(0, elf.SHT_NULL, 0, 0, 0, 0, 0, 0)
	for i, s := range secs {
		off, size := offs[i], uint64(len(s.Data))
		if s.Offset != 0 {
			off = s.Offset
		}
		if s.Size != 0 {
			size = s.Size
		}
		sh(at[i], s.Type, s.Flags, s.Addr, off, size, s.Link, s.Entsize)
	}
	sh(at[len(secs)], elf.SHT_STRTAB, 0, 0, shstrOff, uint64(len(names)), 0, 0)
	b := body.Bytes()
	copy(b, elf.ELFMAG)
	b[elf.EI_CLASS], b[elf.EI_DATA], b[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	le.PutUint16(b[16:], uint16(elf.ET_EXEC))
	le.PutUint16(b[18:], uint16(elf.EM_X86_64))
	le.PutUint32(b[20:], uint32(elf.EV_CURRENT))
	le.PutUint64(b[24:], 0x401000)
	le.PutUint64(b[32:], ehsize)
	le.PutUint64(b[40:], shoff)
	le.PutUint16(b[52:], ehsize)
	le.PutUint16(b[54:], phsize)
	le.PutUint16(b[56:], 1)
	le.PutUint16(b[58:], shsize)
	le.PutUint16(b[60:], uint16(len(secs)+2))
	le.PutUint16(b[62:], uint16(len(secs)+1))
	// The segment: the whole file, read and executed, at 0x400000.
	p := b[ehsize:]
	le.PutUint32(p[0:], uint32(elf.PT_LOAD))
	le.PutUint32(p[4:], uint32(elf.PF_R|elf.PF_X))
	le.PutUint64(p[16:], 0x400000)
	le.PutUint64(p[24:], 0x400000)
	le.PutUint64(p[32:], uint64(len(b)))
	le.PutUint64(p[40:], uint64(len(b)))
	le.PutUint64(p[48:], 0x1000)
	return b
}

// Func is a function of a Go function table or a symbol table.
type Func struct {
	Name        string
	Entry, Size uint64
}

// Pclntab is a Go 1.20 function table (.gopclntab) naming funcs, whose
// entries are offsets from textStart.
func Pclntab(textStart uint64, funcs []Func) []byte {
	const ptr = 8
	le := binary.LittleEndian
	// Header: magic, pad, quantum, pointer size, then eight words:
	// nfunc, nfiles, textStart, and the offsets of the names, the
	// compilation units, the files, the pc tables, the function table.
	hdr := 8 + 8*ptr
	var names []byte
	nameOff := make([]uint32, len(funcs))
	for i, f := range funcs {
		nameOff[i] = uint32(len(names))
		names = append(append(names, f.Name...), 0)
	}
	namesAt := uint64(hdr)
	functabAt := namesAt + uint64(len(names))
	n := uint64(len(funcs))
	// The function table: n+1 (entry offset, record offset) pairs,
	// then the records (entry offset, name offset), from the table.
	functab := make([]byte, (2*n+1)*4, (2*n+1)*4+n*8)
	for i, f := range funcs {
		rec := uint32(len(functab))
		le.PutUint32(functab[8*i:], uint32(f.Entry-textStart))
		le.PutUint32(functab[8*i+4:], rec)
		functab = le.AppendUint32(functab, uint32(f.Entry-textStart))
		functab = le.AppendUint32(functab, nameOff[i])
	}
	if n > 0 {
		last := funcs[n-1]
		le.PutUint32(functab[8*n:], uint32(last.Entry+last.Size-textStart))
	}
	b := make([]byte, hdr, int(functabAt)+len(functab))
	le.PutUint32(b, 0xfffffff1)
	b[6], b[7] = 1, ptr
	words := []uint64{n, 0, textStart, namesAt, functabAt, functabAt, functabAt, functabAt}
	for i, w := range words {
		le.PutUint64(b[8+i*ptr:], w)
	}
	b = append(b, names...)
	return append(b, functab...)
}

// Symbols is a symbol table (Elf64_Sym) of funcs, and its string table.
func Symbols(funcs []Func, section uint16) (symtab, strtab []byte) {
	le := binary.LittleEndian
	strtab = []byte{0}
	symtab = make([]byte, 24) // the null symbol
	for _, f := range funcs {
		var e [24]byte
		le.PutUint32(e[0:], uint32(len(strtab)))
		e[4] = byte(elf.ST_INFO(elf.STB_GLOBAL, elf.STT_FUNC))
		le.PutUint16(e[6:], section)
		le.PutUint64(e[8:], f.Entry)
		le.PutUint64(e[16:], f.Size)
		symtab = append(symtab, e[:]...)
		strtab = append(append(strtab, f.Name...), 0)
	}
	return symtab, strtab
}

// Compressed is a section's data as SHF_COMPRESSED holds it: its header
// (Elf64_Chdr: zlib, claiming size bytes) and the zlib stream z.
func Compressed(size uint64, z []byte) []byte {
	le := binary.LittleEndian
	b := make([]byte, 24, 24+len(z))
	le.PutUint32(b[0:], uint32(elf.COMPRESS_ZLIB))
	le.PutUint64(b[8:], size)
	le.PutUint64(b[16:], 1)
	return append(b, z...)
}

// ZlibZeros is a zlib stream that inflates to n zero bytes (a multiple
// of 1 MiB): one block of a MiB of zeros, repeated, about a thousandth of
// n. It is built from one compressed block, so that a bomb of gigabytes
// costs no time to make.
func ZlibZeros(n int64) []byte {
	const chunk = 1 << 20
	var blk bytes.Buffer
	fw, _ := flate.NewWriter(&blk, flate.BestCompression)
	fw.Write(make([]byte, chunk))
	fw.Flush() // ends the block on a byte boundary: it can be repeated
	one := bytes.Clone(blk.Bytes())
	var z bytes.Buffer
	z.Write([]byte{0x78, 0xda}) // zlib: deflate, 32 KiB window, best compression
	for range n / chunk {
		z.Write(one)
	}
	z.Write([]byte{0x03, 0x00}) // a final empty block of fixed codes
	// Adler-32 of n zeros: a = 1, b = n mod 65521.
	z.Write(binary.BigEndian.AppendUint32(nil, uint32(n%65521)<<16|1))
	return z.Bytes()
}

// CompressedNames turns an executable into one whose section names'
// table claims to be compressed to claim bytes and inflates to them
// (zeros): the bomb is appended to the file and the table's header
// points at it. The kernel runs the file as before (it reads no section
// header); a reader that believes the headers allocates claim bytes.
func CompressedNames(exe []byte, claim int64) ([]byte, error) {
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		return nil, err
	}
	if f.Class != elf.ELFCLASS64 || f.Data != elf.ELFDATA2LSB {
		return nil, errors.New("not a 64-bit little-endian ELF file")
	}
	le := binary.LittleEndian
	shoff := le.Uint64(exe[40:])
	shentsize := uint64(le.Uint16(exe[58:]))
	shstrndx := uint64(le.Uint16(exe[62:]))
	if shoff == 0 || shstrndx == 0 {
		return nil, fmt.Errorf("no section names' table")
	}
	out := bytes.Clone(exe)
	for len(out)%8 != 0 {
		out = append(out, 0)
	}
	at := uint64(len(out))
	bomb := Compressed(uint64(claim), ZlibZeros(claim))
	out = append(out, bomb...)
	h := out[shoff+shstrndx*shentsize:]
	le.PutUint64(h[8:], le.Uint64(h[8:])|uint64(elf.SHF_COMPRESSED))
	le.PutUint64(h[24:], at)
	le.PutUint64(h[32:], uint64(len(bomb)))
	return out, nil
}
