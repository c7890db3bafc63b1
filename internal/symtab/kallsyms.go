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
	"io/fs"
	"slices"
	"strconv"
)

// ErrParse is wrapped by the errors about a file read but not fully
// understood.
var ErrParse = errors.New("parse error")

// Kernel is the kernel's text symbols, sorted by address.
type Kernel struct {
	syms []ksym
}

type ksym struct {
	addr   uint64
	name   string
	module string
}

// LoadKernel reads proc/kallsyms from fsys (rooted at "/"). Addresses
// read as 0 when kernel.kptr_restrict hides them from the reader: the
// kernel frames are then left as addresses, and the error says why.
func LoadKernel(fsys fs.FS) (*Kernel, error) {
	b, err := fs.ReadFile(fsys, "proc/kallsyms")
	if err != nil {
		return nil, err
	}
	return ParseKallsyms(b)
}

// ParseKallsyms parses /proc/kallsyms:
//
//	ffffffff81000000 T _stext
//	ffffffffc0201000 t ftrace_trampoline	[__builtin__ftrace]
//
// keeping the text symbols (types t, T, w, W), whose addresses are where
// a CPU runs.
func ParseKallsyms(b []byte) (*Kernel, error) {
	k := &Kernel{syms: make([]ksym, 0, bytes.Count(b, []byte{'\n'})/2)}
	var bad, zero int
	var firstBad string
	body := b
	truncated := false
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		body, truncated = b[:i+1], true
	}
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		line := body[:i]
		body = body[i+1:]
		f := bytes.Fields(line)
		if len(f) < 3 || len(f[1]) != 1 {
			if len(line) > 0 {
				bad++
				if firstBad == "" {
					firstBad = string(line)
				}
			}
			continue
		}
		switch f[1][0] {
		case 't', 'T', 'w', 'W':
		default:
			continue
		}
		addr, err := strconv.ParseUint(string(f[0]), 16, 64)
		if err != nil {
			bad++
			if firstBad == "" {
				firstBad = string(line)
			}
			continue
		}
		if addr == 0 {
			zero++
			continue
		}
		s := ksym{addr: addr, name: string(f[2])}
		if len(f) > 3 {
			s.module = string(bytes.Trim(f[3], "[]"))
		}
		k.syms = append(k.syms, s)
	}
	slices.SortStableFunc(k.syms, func(a, b ksym) int {
		switch {
		case a.addr < b.addr:
			return -1
		case a.addr > b.addr:
			return 1
		}
		return 0
	})
	var errs []error
	if zero > 0 && len(k.syms) == 0 {
		errs = append(errs, errors.New("kallsyms: every address reads 0 (kernel.kptr_restrict hides them): kernel frames stay addresses"))
	}
	if bad > 0 {
		errs = append(errs, fmt.Errorf("%w: kallsyms: %d lines not understood, the first %q", ErrParse, bad, firstBad))
	}
	if truncated {
		errs = append(errs, fmt.Errorf("%w: kallsyms: truncated: no newline at the end of the file", ErrParse))
	}
	return k, errors.Join(errs...)
}

// Len is the number of symbols.
func (k *Kernel) Len() int { return len(k.syms) }

// Lookup names the kernel function holding addr: the symbol at or just
// below it (several names at one address: the first listed, which is
// what perf shows). ok is false below the first symbol.
func (k *Kernel) Lookup(addr uint64) (name, module string, ok bool) {
	if k == nil {
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
	if found {
		// The first of the symbols at this address.
		for i > 0 && k.syms[i-1].addr == addr {
			i--
		}
		return k.syms[i].name, k.syms[i].module, true
	}
	if i == 0 {
		return "", "", false
	}
	s := k.syms[i-1]
	// The first name listed at that address, as above.
	j := i - 1
	for j > 0 && k.syms[j-1].addr == s.addr {
		j--
	}
	return k.syms[j].name, k.syms[j].module, true
}
