package dropmon

import (
	"bufio"
	"io"
	"sort"
	"strconv"
	"strings"
)

// symbols names kernel addresses from /proc/kallsyms: the text symbol
// at or below each address. A drop's location is one of a few dozen
// call sites, so each is looked up once and cached; the file is read
// again only when an address not seen before turns up.
type symbols struct {
	open  func() (io.ReadCloser, error)
	names map[uint64]string
}

// resolve names every address in addrs not named yet. A kernel that
// hides its addresses (kptr_restrict, not root) lists them as 0: the
// locations then stay unnamed.
func (s *symbols) resolve(addrs []uint64) {
	var want []uint64
	for _, a := range addrs {
		if _, ok := s.names[a]; !ok && a != 0 {
			want = append(want, a)
		}
	}
	if len(want) == 0 {
		return
	}
	f, err := s.open()
	if err != nil {
		for _, a := range want {
			s.names[a] = ""
		}
		return
	}
	defer f.Close()
	found := nearest(f, want)
	for i, a := range want {
		s.names[a] = found[i]
	}
}

// name is an address's function, "" when unknown.
func (s *symbols) name(a uint64) string { return s.names[a] }

// nearest reads kallsyms and returns, for each address, the name of the
// text symbol with the highest address at or below it (its function);
// "" when there is none. Lines it cannot parse are skipped.
func nearest(r io.Reader, addrs []uint64) []string {
	best := make([]uint64, len(addrs))
	out := make([]string, len(addrs))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<16)
	for sc.Scan() {
		line := sc.Text()
		// "ffffffff81a5c2d0 T tcp_v4_rcv" or "... t name\t[module]"
		sp := strings.IndexByte(line, ' ')
		if sp <= 0 || len(line) < sp+4 || line[sp+2] != ' ' {
			continue
		}
		if t := line[sp+1]; t != 't' && t != 'T' {
			continue
		}
		a, err := strconv.ParseUint(line[:sp], 16, 64)
		if err != nil || a == 0 {
			continue
		}
		name := line[sp+3:]
		if tab := strings.IndexByte(name, '\t'); tab >= 0 {
			name = name[:tab]
		}
		for i, want := range addrs {
			if a <= want && a >= best[i] {
				best[i], out[i] = a, name
			}
		}
	}
	return out
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[uint64]V) []uint64 {
	out := make([]uint64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
