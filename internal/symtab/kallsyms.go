// Package symtab turns the addresses of a profile's call chains into
// function names: the kernel's from /proc/kallsyms, a process's from the
// ELF files it has mapped (/proc/PID/maps), their symbol tables, and for
// stripped Go binaries their .gopclntab, which the Go runtime itself
// needs and so never strips.
//
// The files are another user's data: they are opened read-only through
// the kernel's own references (/proc/PID/exe, /proc/PID/map_files), or
// by path without following a symbolic link and only when they are the
// very file mapped (same device and inode), regular files only, and
// nothing is ever executed.
package symtab

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
)

// ErrParse is wrapped by the errors about a file read but not fully
// understood.
var ErrParse = errors.New("parse error")

// Kernel is the kernel's text symbols, sorted by address. Names stay
// in the file's bytes: a profile names a few hundred of ~120 000.
type Kernel struct {
	buf  []byte
	syms []ksym
}

type ksym struct {
	addr       uint64
	name, mod  uint32 // offsets in buf
	nlen, mlen uint16
}

// LoadKernel reads proc/kallsyms from fsys (rooted at "/"). Addresses
// read as 0 when kernel.kptr_restrict hides them from the reader: the
// kernel frames are then left as addresses, and the error says why.
func LoadKernel(fsys fs.FS) (*Kernel, error) {
	f, err := fsys.Open("proc/kallsyms")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// procfs says its size is 0: read it in large pieces into one
	// buffer sized for it (5.4 MB on 6.18), not by doubling from 512
	// bytes, which copied 30 MB more.
	b := make([]byte, 0, 8<<20)
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, cap(b))
		}
		n, err := f.Read(b[len(b):min(cap(b), len(b)+1<<20)])
		b = b[:len(b)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	return ParseKallsyms(b)
}

// ParseKallsyms parses /proc/kallsyms:
//
//	ffffffff81000000 T _stext
//	ffffffffc0201000 t ftrace_trampoline	[__builtin__ftrace]
//
// keeping the text symbols (types t, T, w, W), whose addresses are where
// a CPU runs. It allocates little: the kernel takes ~36 ms to print the
// file on this machine, and parsing should not add more than that.
func ParseKallsyms(b []byte) (*Kernel, error) {
	k := &Kernel{buf: b, syms: make([]ksym, 0, bytes.Count(b, []byte{'\n'})+1)}
	var bad, zero int
	firstBad := -1
	end := len(b)
	truncated := false
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		end, truncated = i+1, true
	}
	sorted := true
	for pos := 0; pos < end; {
		nl := pos + bytes.IndexByte(b[pos:end], '\n')
		s, ok := parseKsym(b, pos, nl)
		switch {
		case !ok:
			if nl > pos {
				bad++
				if firstBad < 0 {
					firstBad = pos
				}
			}
		case s.nlen == 0:
			// not a text symbol
		case s.addr == 0:
			zero++
		default:
			if n := len(k.syms); n > 0 && k.syms[n-1].addr > s.addr {
				sorted = false
			}
			k.syms = append(k.syms, s)
		}
		pos = nl + 1
	}
	if !sorted {
		slices.SortStableFunc(k.syms, func(a, b ksym) int {
			switch {
			case a.addr < b.addr:
				return -1
			case a.addr > b.addr:
				return 1
			}
			return 0
		})
	}
	var errs []error
	if zero > 0 && len(k.syms) == 0 {
		errs = append(errs, errors.New("kallsyms: every address reads 0 (kernel.kptr_restrict hides them): kernel frames stay addresses"))
	}
	if bad > 0 {
		line := b[firstBad:]
		if i := bytes.IndexByte(line, '\n'); i >= 0 {
			line = line[:i]
		}
		errs = append(errs, fmt.Errorf("%w: kallsyms: %d lines not understood, the first %q", ErrParse, bad, line))
	}
	if truncated {
		errs = append(errs, fmt.Errorf("%w: kallsyms: truncated: no newline at the end of the file", ErrParse))
	}
	return k, errors.Join(errs...)
}

// parseKsym parses the line b[from:to]: "ADDR T NAME[\t[MODULE]]". A
// symbol that is no text symbol is ok with no name.
func parseKsym(b []byte, from, to int) (ksym, bool) {
	var s ksym
	i := from
	for ; i < to && b[i] != ' '; i++ {
		c := b[i]
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return s, false
		}
		if s.addr>>60 != 0 {
			return s, false // more than 64 bits
		}
		s.addr = s.addr<<4 | uint64(d)
	}
	if i == from || i+3 > to || b[i+2] != ' ' {
		return s, false
	}
	typ := b[i+1]
	i += 3
	n := i
	for ; n < to && b[n] != '\t' && b[n] != ' '; n++ {
	}
	if n == i || n-i > 0xffff || to > 1<<32-1 {
		return s, false
	}
	switch typ {
	case 't', 'T', 'w', 'W':
	default:
		return s, true
	}
	s.name, s.nlen = uint32(i), uint16(n-i)
	if n < to {
		m := bytes.TrimSpace(b[n:to])
		m = bytes.TrimSuffix(bytes.TrimPrefix(m, []byte("[")), []byte("]"))
		if len(m) > 0 && len(m) <= 0xffff {
			s.mod = uint32(n + bytes.Index(b[n:to], m))
			s.mlen = uint16(len(m))
		}
	}
	return s, true
}

// Len is the number of symbols.
func (k *Kernel) Len() int { return len(k.syms) }

// Lookup names the kernel function holding addr: the symbol at or just
// below it (several names at one address: the first listed, which is
// what perf shows). ok is false below the first symbol.
func (k *Kernel) Lookup(addr uint64) (name, module string, ok bool) {
	if k == nil || len(k.syms) == 0 {
		return "", "", false
	}
	i, found := slices.BinarySearchFunc(k.syms, addr, func(s ksym, a uint64) int {
		switch {
		case s.addr < a:
			return -1
		case s.addr > a:
			return 1
		}
		return 0
	})
	if !found {
		if i == 0 {
			return "", "", false
		}
		i--
	}
	// The first of the symbols at that address.
	for i > 0 && k.syms[i-1].addr == k.syms[i].addr {
		i--
	}
	s := k.syms[i]
	return string(k.buf[s.name : s.name+uint32(s.nlen)]), string(k.buf[s.mod : s.mod+uint32(s.mlen)]), true
}
