package procnet

import "sync"

// maxInterned bounds the interned keys. A 6.x kernel prints about 450
// distinct counter and sockstat names; the bound keeps a damaged or
// hostile file from growing the table without limit.
const maxInterned = 4096

// keys interns the map keys built by the parsers, such as
// "TcpExt.ListenOverflows". The kernel prints the same few hundred names
// on every read, and the sampler reads every second, so without it each
// read would allocate every key anew.
var keys = internTable{m: make(map[string]string, 512)}

// internTable is a bounded set of strings safe for concurrent use.
type internTable struct {
	mu sync.Mutex
	m  map[string]string
}

// lock locks t for a series of calls to get, as parsing one file makes.
func (t *internTable) lock() { t.mu.Lock() }

// unlock unlocks t.
func (t *internTable) unlock() { t.mu.Unlock() }

// get returns b as a string, the same string each time while the table
// has room. The caller must hold the lock.
func (t *internTable) get(b []byte) string {
	if s, ok := t.m[string(b)]; ok { // does not allocate
		return s
	}
	s := string(b)
	if len(t.m) < maxInterned {
		t.m[s] = s
	}
	return s
}
