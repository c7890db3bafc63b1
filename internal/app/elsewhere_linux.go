package app

import (
	"net/netip"
	"os"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/netns"
	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// farListener is a destination's listener found in another network
// namespace of the host, with its owners.
type farListener struct {
	ns netns.Found
	l  kernel.Listener
}

// findElsewhere looks, in every network namespace of the host but own,
// for the one that has dst's address on an interface and a listener that
// a connection to dst reaches, and the processes that own that listener
// among the namespace's. complete is false when a namespace could not
// be looked into (not root): then finding none does not prove that the
// destination is on another host. It enters each namespace once: callers
// do it once per destination, never per sample.
//
// A namespace an unprivileged user created (`unshare -rn`: owned by a
// user namespace of their own, netns.OwnedByRoot) is not looked into
// unless it has an `ip netns` name, which only root gives: its
// addresses and listeners are that user's say-so, and a listener there
// on a dependency's address would be taken for the dependency and its
// process followed. It is left out as another host would be.
func findElsewhere(proc string, own uint64, dst netip.AddrPort) (found []farListener, complete bool) {
	complete = true
	for _, f := range netns.All() {
		if f.Inode == own {
			continue
		}
		if f.Name == "" {
			if root, err := netns.OwnedByRoot(f.Path); err != nil || !root {
				continue
			}
		}
		var l kernel.Listener
		ok := false
		err := f.Do(func() error {
			if !localAddrs()[dst.Addr()] {
				return nil
			}
			q, err := sockdiag.NewQuerier()
			if err != nil {
				return err
			}
			defer q.Close()
			l, ok, err = q.Listener(dst)
			return err
		})
		if err != nil {
			complete = false
			continue
		}
		if ok {
			l.PIDs = socketOwners(proc, f.PIDs, l.Inode)
			found = append(found, farListener{ns: f, l: l})
		}
	}
	return found, complete
}

// socketOwners are the processes among pids that hold socket inode.
func socketOwners(proc string, pids []int, inode uint64) []int {
	want := "socket:[" + strconv.FormatUint(inode, 10) + "]"
	var out []int
	for _, pid := range pids {
		dir := proc + "/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if link, err := os.Readlink(dir + "/" + e.Name()); err == nil && link == want {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}
