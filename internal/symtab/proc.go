package symtab

import (
	"fmt"
	"os"
	"path"
	"strconv"
	"sync"
)

// Frame is one address of a call chain, named.
type Frame struct {
	// Func is the function, "" when unknown (then Addr says where).
	Func string
	// Module is the file it is in ("/usr/sbin/nginx"), "[kernel]" or
	// a module's name in brackets, "" when the address is in no file.
	Module string
	// Addr is the address in the process (or the kernel).
	Addr uint64
	// Mapping is the index of the mapping it is in, -1 for none.
	Mapping int
}

// Resolver names the addresses of processes and of the kernel. The ELF
// files it opens are cached by device and inode, so the workers of one
// server read their binary once.
type Resolver struct {
	// Proc is the procfs root, "/proc".
	Proc   string
	Kernel *Kernel

	mu   sync.Mutex
	objs map[fileKey]*Object // nil: could not be read
	errs map[fileKey]error
}

type fileKey struct {
	major, minor uint32
	inode        uint64
}

// NewResolver makes a resolver over proc with the kernel's symbols.
func NewResolver(proc string, k *Kernel) *Resolver {
	return &Resolver{Proc: proc, Kernel: k, objs: map[fileKey]*Object{}, errs: map[fileKey]error{}}
}

// Maps reads process pid's mappings.
func (r *Resolver) Maps(pid int) ([]Mapping, error) {
	b, err := os.ReadFile(r.Proc + "/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	return ParseMaps(b)
}

// KernelFrame names a kernel address.
func (r *Resolver) KernelFrame(addr uint64) Frame {
	f := Frame{Addr: addr, Module: "[kernel]", Mapping: -1}
	if name, mod, ok := r.Kernel.Lookup(addr); ok {
		f.Func = name
		if mod != "" {
			f.Module = "[" + mod + "]"
		}
	}
	return f
}

// UserFrame names an address of process pid, whose mappings are maps.
func (r *Resolver) UserFrame(pid int, maps []Mapping, addr uint64) Frame {
	f := Frame{Addr: addr, Mapping: -1}
	i := findMapping(maps, addr)
	if i < 0 {
		return f
	}
	m := maps[i]
	f.Mapping = i
	f.Module = m.Path
	if !m.File() {
		return f
	}
	o := r.object(pid, m)
	if o == nil {
		return f
	}
	if v, ok := o.Vaddr(addr - m.Start + m.Offset); ok {
		f.Func, _ = o.Lookup(v)
	}
	return f
}

// Errors are the files that could not be read, with why.
func (r *Resolver) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for k, err := range r.errs {
		out = append(out, fmt.Sprintf("%d:%d inode %d: %v", k.major, k.minor, k.inode, err))
	}
	return out
}

// Module names a mapping for a report: the file's base name.
func Module(p string) string {
	if p == "" {
		return "[anonymous]"
	}
	return path.Base(p)
}

func findMapping(maps []Mapping, addr uint64) int {
	lo, hi := 0, len(maps)
	for lo < hi {
		mid := (lo + hi) / 2
		switch m := maps[mid]; {
		case addr < m.Start:
			hi = mid
		case addr >= m.End:
			lo = mid + 1
		default:
			return mid
		}
	}
	return -1
}

// object loads (once) the ELF file behind mapping m of process pid.
func (r *Resolver) object(pid int, m Mapping) *Object {
	k := fileKey{m.Major, m.Minor, m.Inode}
	r.mu.Lock()
	o, ok := r.objs[k]
	r.mu.Unlock()
	if ok {
		return o
	}
	f, err := openMapped(r.Proc, pid, m)
	if err == nil {
		o, err = LoadObject(f)
		f.Close()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if o != nil && o.Len() == 0 {
		o = nil
	}
	r.objs[k] = o
	if err != nil {
		r.errs[k] = err
	}
	return o
}
