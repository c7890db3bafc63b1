package app

import (
	"os"
	"slices"
	"strconv"
	"testing"
	"time"
)

type fakeEntry struct {
	os.DirEntry
	name string
}

func (f fakeEntry) Name() string { return f.name }

// TestWindow: a process with more descriptors than maxFDScan is walked
// maxFDScan at a time, each walk starting where the last stopped and
// wrapping around, so that every descriptor is read within a few walks.
func TestWindow(t *testing.T) {
	t.Parallel()
	tr := &tracer{offset: map[int]int{}}
	n := maxFDScan*2 + 100
	var ents []os.DirEntry
	for i := range n {
		ents = append(ents, fakeEntry{name: strconv.Itoa(i)})
	}
	seen := map[string]int{}
	for walk := range 3 {
		w := tr.window(7, ents)
		if len(w) != maxFDScan {
			t.Fatalf("walk %d read %d descriptors, want %d", walk, len(w), maxFDScan)
		}
		for _, e := range w {
			seen[e.Name()]++
		}
	}
	if len(seen) != n {
		t.Errorf("three walks read %d of %d descriptors", len(seen), n)
	}
	if small := ents[:10]; !slices.Equal(tr.window(8, small), small) {
		t.Errorf("a small process was not read whole")
	}
}

// TestPrune: a connection the last lookup did not find is closed: it
// leaves the ones looked up, its place is free, its samples stay.
func TestPrune(t *testing.T) {
	t.Parallel()
	now := time.Now()
	open, closed := &connTrace{ino: 1, at: now}, &connTrace{ino: 2, at: now.Add(-time.Second), n: 5}
	tr := &tracer{conns: []*connTrace{open, closed}, alive: []*connTrace{open, closed}, byInode: map[uint64]*connTrace{1: open, 2: closed}}
	tr.prune(now)
	if len(tr.alive) != 1 || tr.alive[0] != open || tr.byInode[2] != nil || len(tr.conns) != 2 {
		t.Errorf("after prune: alive %v, byInode %v, conns %d", tr.alive, tr.byInode, len(tr.conns))
	}
}
