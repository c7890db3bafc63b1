package symtab

import (
	"debug/elf"
	"errors"
	"fmt"
)

// The magic numbers of Go's function table, by the release that
// introduced its layout (runtime/symtab.go; debug/gosym reads the same).
const (
	pcln12  = 0xfffffffb
	pcln116 = 0xfffffffa
	pcln118 = 0xfffffff0
	pcln120 = 0xfffffff1
)

// addGo reads a Go program's functions from .gopclntab: each function's
// entry and end, and its name. debug/gosym would read the same table,
// but it copies every name and makes a Func and a Sym of 200 bytes for
// each entry the header claims; here the table is kept once as a string
// and the names are substrings of it, its entries bounded by its size
// and the file's budget.
func (o *Object) addGo(f *elf.File, size int64, budget *int64) (int, error) {
	pcln, text := f.Section(".gopclntab"), f.Section(".text")
	if pcln == nil || text == nil {
		return 0, nil
	}
	data, err := sectionData(pcln, size, budget, "Go's function table")
	if err != nil {
		return 0, err
	}
	funcs, err := goFuncs(data, text.Addr, *budget)
	if err != nil {
		*budget += int64(len(data))
		return 0, fmt.Errorf("gopclntab: %w", err)
	}
	*budget -= int64(len(funcs)) * funcSize
	o.funcs = append(o.funcs, funcs...)
	return len(funcs), nil
}

// goFuncs parses Go's function table (Go 1.2 to today's layout): the
// functions' entries, from the table's own header, each ending where
// the next begins, and their names. A table whose header points outside
// it is an error; a name is cut at maxName. budget bounds the functions
// kept (funcSize each).
func goFuncs(data string, textStart uint64, budget int64) ([]function, error) {
	if len(data) < 16 || data[4] != 0 || data[5] != 0 || (data[6] != 1 && data[6] != 2 && data[6] != 4) || (data[7] != 4 && data[7] != 8) {
		return nil, errors.New("not a Go function table")
	}
	var bo order
	magic := bo.u32(data)
	switch magic {
	case pcln12, pcln116, pcln118, pcln120:
	default:
		bo.big = true
		magic = bo.u32(data)
		switch magic {
		case pcln12, pcln116, pcln118, pcln120:
		default:
			return nil, errors.New("not a Go function table")
		}
	}
	ptr := uint64(data[7])
	uintptr := func(off uint64) (uint64, bool) {
		if off > uint64(len(data)) || ptr > uint64(len(data))-off {
			return 0, false
		}
		if ptr == 4 {
			return uint64(bo.u32(data[off:])), true
		}
		return bo.u64(data[off:]), true
	}
	word := func(i uint64) (uint64, bool) { return uintptr(8 + i*ptr) }
	from := func(i uint64) (string, bool) {
		off, ok := word(i)
		if !ok || off > uint64(len(data)) {
			return "", false
		}
		return data[off:], true
	}
	var (
		nfunc             uint64
		functab, funcdata string
		names             string
		field             = ptr // the size of a function table's field
		entry0            = ptr // the size of _func's first field, the entry
		ok1, ok2, ok3     bool
	)
	switch magic {
	case pcln118, pcln120:
		nfunc, ok1 = word(0)
		names, ok2 = from(3)
		functab, ok3 = from(7)
		funcdata = functab
		field, entry0 = 4, 4
	case pcln116:
		nfunc, ok1 = word(0)
		names, ok2 = from(2)
		functab, ok3 = from(6)
		funcdata = functab
	case pcln12:
		nfunc, ok1 = word(0)
		names, funcdata, ok2 = data, data, true
		functab, ok3 = data[min(uint64(len(data)), 8+ptr):], 8+ptr <= uint64(len(data))
	}
	if !ok1 || !ok2 || !ok3 {
		return nil, errors.New("its header points outside it")
	}
	// The table holds nfunc+1 entries (the last is the end of the last
	// function) of two fields each.
	if nfunc > uint64(len(functab))/(2*field) || (2*nfunc+1)*field > uint64(len(functab)) {
		return nil, fmt.Errorf("%d functions claimed in a table of %d bytes", nfunc, len(functab))
	}
	if nfunc*funcSize > uint64(max(budget, 0)) {
		return nil, overBudget("%d functions take more than the %s left of the %s netdoctor reads of one file", nfunc, mib(uint64(max(budget, 0))), mib(ObjectBudget))
	}
	get := func(s string, off uint64) uint64 {
		if field == 4 {
			return uint64(bo.u32(s[off:]))
		}
		return bo.u64(s[off:])
	}
	pc := func(i uint64) uint64 {
		u := get(functab, 2*i*field)
		if field == 4 {
			u += textStart // Go 1.18: offsets from the start of the text
		}
		return u
	}
	out := make([]function, 0, nfunc)
	for i := range nfunc {
		off := get(functab, (2*i+1)*field)
		// _func: the entry (a pointer, or from Go 1.18 an offset), then
		// nameOff (int32), from the table's names.
		if off > uint64(len(funcdata)) || entry0+4 > uint64(len(funcdata))-off {
			return nil, fmt.Errorf("function %d's record is outside the table", i)
		}
		nameOff := uint64(bo.u32(funcdata[off+entry0:]))
		entry, end := pc(i), pc(i+1)
		if end < entry {
			end = entry
		}
		out = append(out, function{addr: entry, size: end - entry, name: cString(names, nameOff)})
	}
	return out, nil
}
