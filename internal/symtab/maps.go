package symtab

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/PID/maps: a range of the address space
// and the file, at an offset, that backs it.
type Mapping struct {
	Start, End uint64
	Perms      string // "r-xp"
	Offset     uint64
	Major      uint32
	Minor      uint32
	Inode      uint64
	// Path is the file, or a pseudo-name ("[heap]", "[vdso]"), or "" for
	// anonymous memory (a JIT's code lives there).
	Path string
	// Deleted: the file was removed or replaced since it was mapped
	// (" (deleted)" after its path): an upgrade under a running server.
	Deleted bool
}

// Exec reports whether the mapping holds code.
func (m Mapping) Exec() bool { return len(m.Perms) > 2 && m.Perms[2] == 'x' }

// File reports whether the mapping is backed by a file on disk.
func (m Mapping) File() bool { return m.Inode != 0 && strings.HasPrefix(m.Path, "/") }

// ParseMaps parses /proc/PID/maps:
//
//	56158e5cf000-56158e5d4000 r-xp 00002000 fe:00 247026     /usr/bin/cat
//
// A path may hold spaces (it runs to the end of the line) and ends in
// " (deleted)" when the file is gone.
func ParseMaps(b []byte) ([]Mapping, error) {
	var out []Mapping
	var errs []string
	body := b
	if i := bytes.LastIndexByte(b, '\n'); i+1 < len(b) {
		body = b[:i+1]
		errs = append(errs, "truncated: no newline at the end of the file")
	}
	n := 0
	for len(body) > 0 {
		i := bytes.IndexByte(body, '\n')
		line := string(body[:i])
		body = body[i+1:]
		n++
		m, err := parseMapsLine(line)
		if err != nil {
			if len(errs) < 3 {
				errs = append(errs, fmt.Sprintf("line %d: %v", n, err))
			}
			continue
		}
		out = append(out, m)
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("%w: maps: %s", ErrParse, strings.Join(errs, "; "))
	}
	return out, nil
}

func parseMapsLine(line string) (Mapping, error) {
	var m Mapping
	var f [5]string
	rest := line
	for i := range f {
		rest = strings.TrimLeft(rest, " ")
		j := strings.IndexByte(rest, ' ')
		if j < 0 {
			if i < 4 {
				return m, errors.New("too few fields")
			}
			j = len(rest)
		}
		f[i], rest = rest[:j], rest[j:]
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	var err1, err2, err3 error
	m.Start, err1 = strconv.ParseUint(lo, 16, 64)
	m.End, err2 = strconv.ParseUint(hi, 16, 64)
	m.Offset, err3 = strconv.ParseUint(f[2], 16, 64)
	if !ok || errors.Join(err1, err2, err3) != nil || m.End < m.Start {
		return m, fmt.Errorf("range %q or offset %q", f[0], f[2])
	}
	m.Perms = f[1]
	maj, min, ok := strings.Cut(f[3], ":")
	a, err1 := strconv.ParseUint(maj, 16, 32)
	b, err2 := strconv.ParseUint(min, 16, 32)
	if !ok || errors.Join(err1, err2) != nil {
		return m, fmt.Errorf("device %q", f[3])
	}
	m.Major, m.Minor = uint32(a), uint32(b)
	ino, err := strconv.ParseUint(f[4], 10, 64)
	if err != nil {
		return m, fmt.Errorf("inode %q", f[4])
	}
	m.Inode = ino
	m.Path = strings.TrimLeft(rest, " ")
	if p, ok := strings.CutSuffix(m.Path, " (deleted)"); ok {
		m.Path, m.Deleted = p, true
	}
	return m, nil
}
