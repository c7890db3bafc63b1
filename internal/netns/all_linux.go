package netns

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// All lists the host's network namespaces once each (by inode): those
// `ip netns` names, then those only processes hold, each entered
// through its first process's /proc/PID/ns/net. A namespace held only by
// a bind mount elsewhere, or a process this one may not look at, is
// missed. The cost is one stat per process and per name.
func All() []Found {
	byIno := map[uint64]*Found{}
	var out []*Found
	names, _ := List()
	for _, n := range names {
		ns := Parse(n)
		var st unix.Stat_t
		if unix.Stat(ns.Path, &st) != nil || byIno[st.Ino] != nil {
			continue
		}
		ns.Inode = st.Ino
		f := &Found{NS: ns}
		byIno[st.Ino] = f
		out = append(out, f)
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		path := filepath.Join("/proc", e.Name(), "ns", "net")
		var st unix.Stat_t
		if unix.Stat(path, &st) != nil {
			continue
		}
		f := byIno[st.Ino]
		if f == nil {
			f = &Found{NS: NS{Path: path, Inode: st.Ino}}
			byIno[st.Ino] = f
			out = append(out, f)
		}
		f.PIDs = append(f.PIDs, pid)
	}
	res := make([]Found, 0, len(out))
	for _, f := range out {
		slices.Sort(f.PIDs)
		res = append(res, *f)
	}
	return res
}
