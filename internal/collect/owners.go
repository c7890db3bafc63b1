package collect

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"
)

// ownerRef is one file descriptor that refers to a socket.
type ownerRef struct{ pid, fd int }

// firstFDs is how many of each process's descriptors the first pass of
// an owner scan reads.
const firstFDs = 256

// owners maps socket inodes to the processes holding them, by reading the
// links in /proc/PID/fd as ss -p does. A full scan costs one readlink per
// open file on the host, so results are cached: a cached owner is checked
// with one readlink, and inodes nobody owned are looked for again only
// after retryAfter.
type owners struct {
	procDir    string // "/proc"
	netnsInode uint64 // only processes in this namespace; 0 means all
	cache      map[uint64][]ownerRef
	missing    map[uint64]time.Time
	retryAfter time.Duration
}

func newOwners(procDir string, netnsInode uint64) *owners {
	return &owners{procDir: procDir, netnsInode: netnsInode,
		cache: map[uint64][]ownerRef{}, missing: map[uint64]time.Time{}, retryAfter: 10 * time.Second}
}

// lookup returns the PIDs owning each inode, lowest first.
func (o *owners) lookup(inodes []uint64, now time.Time) map[uint64][]int {
	out := make(map[uint64][]int, len(inodes))
	need := map[uint64]bool{}
	for _, ino := range inodes {
		if refs := o.verify(ino); len(refs) > 0 {
			out[ino] = pidsOf(refs)
			continue
		}
		if t, ok := o.missing[ino]; ok && now.Sub(t) < o.retryAfter {
			continue
		}
		need[ino] = true
	}
	if len(need) > 0 {
		// Listeners are opened early, so they sit among a process's
		// lowest descriptors (and forked workers inherit the same
		// numbers). Looking there first costs a few thousand readlinks
		// instead of one per connection on a busy host; only what is
		// still missing is looked for in every descriptor.
		found := o.scan(need, firstFDs)
		rest := map[uint64]bool{}
		for ino := range need {
			if len(found[ino]) == 0 {
				rest[ino] = true
			}
		}
		if len(rest) > 0 {
			for ino, refs := range o.scan(rest, 0) {
				found[ino] = refs
			}
		}
		for ino := range need {
			if refs := found[ino]; len(refs) > 0 {
				o.cache[ino] = refs
				delete(o.missing, ino)
				out[ino] = pidsOf(refs)
			} else {
				delete(o.cache, ino)
				o.missing[ino] = now
			}
		}
	}
	return out
}

// verify keeps the cached references to ino that still point at it.
func (o *owners) verify(ino uint64) []ownerRef {
	refs := o.cache[ino]
	if len(refs) == 0 {
		return nil
	}
	want := "socket:[" + strconv.FormatUint(ino, 10) + "]"
	kept := refs[:0]
	for _, r := range refs {
		l, err := os.Readlink(filepath.Join(o.procDir, strconv.Itoa(r.pid), "fd", strconv.Itoa(r.fd)))
		if err == nil && l == want {
			kept = append(kept, r)
		}
	}
	// A new worker forked since the scan would be missed; rescan when any
	// reference went stale, since the process set has changed.
	if len(kept) != len(refs) {
		delete(o.cache, ino)
		return nil
	}
	return kept
}

// scan walks every process (in the namespace, if set) for the inodes,
// one worker per CPU: a host with 100k sockets has 100k links to read.
// With limit > 0 only each process's lowest limit descriptors are read.
func (o *owners) scan(need map[uint64]bool, limit int) map[uint64][]ownerRef {
	found := map[uint64][]ownerRef{}
	ents, err := os.ReadDir(o.procDir)
	if err != nil {
		return found
	}
	wantNS := ""
	if o.netnsInode != 0 {
		wantNS = "net:[" + strconv.FormatUint(o.netnsInode, 10) + "]"
	}
	pids := make(chan int)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range max(runtime.NumCPU(), 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for pid := range pids {
				refs := scanFDs(filepath.Join(o.procDir, strconv.Itoa(pid), "fd"), pid, need, limit)
				mu.Lock()
				for _, r := range refs {
					found[r.ino] = append(found[r.ino], r.ownerRef)
				}
				mu.Unlock()
			}
		}()
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if wantNS != "" {
			l, err := os.Readlink(filepath.Join(o.procDir, e.Name(), "ns", "net"))
			if err != nil || l != wantNS {
				continue
			}
		}
		pids <- pid
	}
	close(pids)
	wg.Wait()
	return found
}

// inodeRef is a reference found by scanFDs.
type inodeRef struct {
	ownerRef
	ino uint64
}

func pidsOf(refs []ownerRef) []int {
	pids := make([]int, 0, len(refs))
	for _, r := range refs {
		pids = append(pids, r.pid)
	}
	slices.Sort(pids)
	return slices.Compact(pids)
}
