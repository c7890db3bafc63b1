package symtab

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strconv"
	"sync"
	"time"
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
//
// It works within a budget, whatever the files are: each file's
// (ObjectBudget), the memory of all the files it keeps (ResolverBudget)
// and the time it spends reading them (ResolverTime); a file past either
// is skipped, and Errors says so.
type Resolver struct {
	// Proc is the procfs root, "/proc".
	Proc   string
	Kernel *Kernel

	mu    sync.Mutex
	objs  map[fileKey]*Object // nil: could not be read
	errs  map[fileKey]error
	paths map[fileKey]string // what maps named the files not read
	kept  int64              // the objects' Size, together
	spent time.Duration      // reading them
}

// What one Resolver (one profile) reads at most: the files' tables and
// functions it keeps, and the time it spends reading them.
const (
	ResolverBudget = 2 * ObjectBudget
	ResolverTime   = 10 * time.Second
)

// MaxMaps is what netdoctor reads at most of a process's
// /proc/PID/maps: a process may map 65 530 files with names of 4 KiB
// each (256 MiB of lines); a server's maps are rarely over 1 MiB.
const MaxMaps = 8 << 20

// ReadMaps reads and parses process pid's mappings, within MaxMaps: a
// larger file is an error wrapping ErrBudget, and none of it is kept.
func ReadMaps(proc string, pid int) ([]Mapping, error) {
	f, err := os.Open(proc + "/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxMaps+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxMaps {
		return nil, overBudget("pid %d: its maps are larger than %s", pid, mib(MaxMaps))
	}
	return ParseMaps(b)
}

type fileKey struct {
	major, minor uint32
	inode        uint64
}

// NewResolver makes a resolver over proc with the kernel's symbols.
func NewResolver(proc string, k *Kernel) *Resolver {
	return &Resolver{Proc: proc, Kernel: k, objs: map[fileKey]*Object{}, errs: map[fileKey]error{}, paths: map[fileKey]string{}}
}

// Maps reads process pid's mappings (ReadMaps).
func (r *Resolver) Maps(pid int) ([]Mapping, error) { return ReadMaps(r.Proc, pid) }

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
		out = append(out, fmt.Sprintf("%s (%d:%d inode %d): %v", r.paths[k], k.major, k.minor, k.inode, err))
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
	r.mu.Lock()
	spent, kept := r.spent, r.kept
	r.mu.Unlock()
	var err error
	var took time.Duration
	switch {
	case spent >= ResolverTime:
		err = overBudget("%v spent reading the profile's files, at most %v", spent.Round(time.Millisecond), ResolverTime)
	case kept >= ResolverBudget:
		err = overBudget("the profile's files take %s, at most %s", mib(uint64(kept)), mib(ResolverBudget))
	default:
		start := time.Now()
		var f *os.File
		if f, err = openMapped(r.Proc, pid, m); err == nil {
			o, err = LoadObject(f)
			f.Close()
		}
		took = time.Since(start)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spent += took
	if o != nil && (o.Len() == 0 || r.kept+o.Size > ResolverBudget) {
		if o.Len() > 0 {
			err = errors.Join(err, overBudget("%s more would take the profile's files past %s", mib(uint64(o.Size)), mib(ResolverBudget)))
		}
		o = nil
	}
	if o != nil {
		r.kept += o.Size
	}
	r.objs[k] = o
	if err != nil {
		r.errs[k], r.paths[k] = err, m.Path
	}
	return o
}
