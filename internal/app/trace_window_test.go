package app

import (
	"slices"
	"testing"
	"time"

	"github.com/netdoctor/netdoctor/internal/sockdiag"
)

// fakeFDs lists the descriptors fds (sorted) as listFDs lists a
// process's.
func fakeFDs(fds []int) fdLister {
	return func(from int, fn func(int) bool) (bool, error) {
		for _, fd := range fds {
			if fd >= from && !fn(fd) {
				return false, nil
			}
		}
		return true, nil
	}
}

// TestWalkFDs: a process with more descriptors than maxFDScan is walked
// maxFDScan at a time, each walk starting where the last stopped and
// wrapping around, so that every descriptor is read within a few walks;
// a walk stopped early resumes where it stopped; a small process is
// read whole.
func TestWalkFDs(t *testing.T) {
	t.Parallel()
	tr := &tracer{offset: map[int]int{}}
	n := maxFDScan*2 + 100
	var fds []int
	for i := range n {
		fds = append(fds, 3+2*i) // not dense: positions are by number
	}
	seen := map[int]int{}
	for walk := range 3 {
		read := 0
		partial, err := tr.walkFDs(7, fakeFDs(fds), func(fd int) bool { seen[fd]++; read++; return true })
		if err != nil || !partial || read != maxFDScan {
			t.Fatalf("walk %d read %d descriptors (partial %v, %v), want %d", walk, read, partial, err, maxFDScan)
		}
	}
	if len(seen) != n {
		t.Errorf("three walks read %d of %d descriptors", len(seen), n)
	}

	small := fds[:10]
	var got []int
	if partial, _ := tr.walkFDs(8, fakeFDs(small), func(fd int) bool { got = append(got, fd); return true }); partial || !slices.Equal(got, small) {
		t.Errorf("a small process was read as %v (partial %v)", got, partial)
	}

	got = nil
	if partial, _ := tr.walkFDs(9, fakeFDs(small), func(fd int) bool { got = append(got, fd); return len(got) < 4 }); !partial {
		t.Errorf("a walk stopped early is not partial")
	}
	got = nil
	tr.walkFDs(9, fakeFDs(small), func(fd int) bool { got = append(got, fd); return true })
	if want := append(slices.Clone(small[3:]), small[:3]...); !slices.Equal(got, want) {
		t.Errorf("the walk after a stop read %v, want %v", got, want)
	}
}

// TestPrune: a connection the last lookup did not find is closed: it
// leaves the ones looked up, its place is free, its samples stay; one
// not looked up this tick (quiet) stays.
func TestPrune(t *testing.T) {
	t.Parallel()
	now := time.Now()
	open, closed := &connTrace{ino: 1, at: now}, &connTrace{ino: 2, at: now.Add(-time.Second), n: 5}
	quiet := &connTrace{ino: 3, at: now.Add(-time.Second), n: 5}
	tr := &tracer{conns: []*connTrace{open, closed, quiet}, alive: []*connTrace{open, closed, quiet}, byInode: map[uint64]*connTrace{1: open, 2: closed, 3: quiet}}
	tr.prune([]*connTrace{open, closed}, now)
	if len(tr.alive) != 2 || tr.alive[0] != open || tr.alive[1] != quiet || tr.byInode[2] != nil || len(tr.conns) != 3 {
		t.Errorf("after prune: alive %v, byInode %v, conns %d", tr.alive, tr.byInode, len(tr.conns))
	}
}

// TestSampleQuiet: a connection with nothing moving is looked at once
// a second after quietAfter looks, the ticks it skipped count as looks
// alike its last one (waiting for the next movement, which decides them:
// a request first, they were idle), and its first data segment puts it
// back to every tick.
func TestSampleQuiet(t *testing.T) {
	t.Parallel()
	const slow = 10
	c := &connTrace{}
	ti := sockdiag.TCPInfo{Size: 1 << 10, DataSegsOut: 7, DataSegsIn: 7, BytesReceived: 70, LastDataSent: 500, LastDataRecv: 400, LastAckRecv: 400}
	now := time.Now()
	for tick := range quietAfter + 1 {
		if c.due > tick {
			t.Fatalf("tick %d skipped: due %d", tick, c.due)
		}
		c.sample(now, &ti, tick, slow)
	}
	if c.quiet != quietAfter || c.due != quietAfter+slow {
		t.Fatalf("after %d ticks: quiet %d, due %d", quietAfter+1, c.quiet, c.due)
	}
	c.sample(now, &ti, c.due, slow)
	if c.n != c.tick+1 || c.decided != 0 || c.chain != c.n {
		t.Errorf("a quiet connection has %d looks (%d decided, %d waiting) after %d ticks", c.n, c.decided, c.chain, c.tick+1)
	}
	// A request goes out and waits for its answer: the looks before it
	// were idle, this one busy.
	ti.DataSegsOut++
	ti.LastDataSent = 10
	at := c.due
	c.sample(now, &ti, at, slow)
	if c.due != at+1 || c.quiet != 0 || c.busy != 1 || c.decided != c.n {
		t.Errorf("a connection that sent: due %d at tick %d, quiet %d, busy %d, %d of %d decided", c.due, at, c.quiet, c.busy, c.decided, c.n)
	}
	if c.n != at-slow+2 {
		t.Errorf("the ticks skipped before a change were counted: %d looks at tick %d", c.n, at)
	}
}

// TestSampleQuietAcked: a connection whose looks decide nothing because
// its request, the answer before it and the peer's ACK of it share a
// jiffy (php-fpm acknowledging a request at once, its answer 2 s away)
// goes quiet too; its skipped ticks wait with it, and are busy when the
// answer comes first.
func TestSampleQuietAcked(t *testing.T) {
	t.Parallel()
	const slow = 10
	c := &connTrace{}
	ti := sockdiag.TCPInfo{Size: 1 << 10, DataSegsOut: 8, DataSegsIn: 7, BytesReceived: 70, LastDataSent: 300, LastDataRecv: 300, LastAckRecv: 300}
	now := time.Now()
	for tick := range quietAfter + 1 {
		c.sample(now, &ti, tick, slow)
	}
	c.sample(now, &ti, c.due, slow)
	if c.n != c.tick+1 || c.decided != 0 {
		t.Fatalf("%d looks after %d ticks, %d decided: want every one waiting", c.n, c.tick+1, c.decided)
	}
	ti.DataSegsIn++
	ti.BytesReceived += 10
	ti.LastDataRecv, ti.LastAckRecv = 4, 4
	n := c.n
	c.sample(now, &ti, c.due, slow)
	if c.decided != n || c.busy != n {
		t.Errorf("%d of %d decided, %d busy: the answer came first, they were all busy", c.decided, n, c.busy)
	}
}
