package dropmon

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/conntrack"
	"github.com/netdoctor/netdoctor/internal/netns"
)

// The drops whose packet carried no conntrack entry, and the
// retransmitting connections, are followed through NAT here, in user
// space: a packet that crosses into another namespace (a veth) leaves its
// entry behind, so a listener's overflow in a server's namespace, behind
// a router namespace that DNATs a virtual IP, drops a packet addressed to
// the server's own address. The router's table still holds the entry:
// its reply tuple is that packet's, reversed. So each such flow is asked
// of the conntrack table of every namespace of the host that has entries
// (ctnetlink, one lookup by tuple each, either way round), and the
// entry's original tuple is the flow as its client opened it. An entry
// that translates (NAT) is preferred to one that does not, and followed
// upstream up to maxHops translations.
//
// What BPF reads on the skb (its own entry, at the moment of the drop)
// needs none of this; a join happens once per flow, its result kept
// while the flow is in the tables.

// Bounds of one search.
const (
	// maxLookups bounds the ctnetlink requests of one search (about
	// 10 µs each): the tuples left over are searched next time.
	maxLookups = 1024
	// maxHops is how many translations a flow is followed through (a
	// DNAT at the edge, then a service's).
	maxHops = 3
	// nsEvery is how long the list of namespaces is kept.
	nsEvery = 5 * time.Second
	// forgetSlack is how many results beyond twice the flows counted
	// are kept before those of flows gone are forgotten.
	forgetSlack = 1024
)

// joiner keeps what the searches found, per tuple looked up.
type joiner struct {
	mu    sync.Mutex
	found map[conntrack.Tuple]joined
	// hits are the flows found in a table: what a search answers.
	hits   map[conntrack.Tuple]Join
	spaces []space
	listed time.Time
	// dial opens a ctnetlink socket in a namespace (tests: a fake).
	dial func(path string) (ctLookup, error)
	// list lists the namespaces to search; present says whether the
	// kernel has conntrack at all.
	list    func() []space
	present func() bool
	// budget is the most lookups a search makes (maxLookups); slack
	// the results kept beyond twice the flows (forgetSlack).
	budget, slack int
}

// joined is one tuple's result: ok when an entry was found.
type joined struct {
	j  Join
	ok bool
}

// space is a namespace whose table may be searched.
type space struct {
	ino  uint64
	path string
}

// ctLookup is what a search asks of a ctnetlink socket.
type ctLookup interface {
	Global() (conntrack.Global, error)
	Get(conntrack.Tuple) (conntrack.Entry, error)
	Close() error
}

func newJoiner() *joiner {
	return &joiner{found: map[conntrack.Tuple]joined{}, hits: map[conntrack.Tuple]Join{},
		dial: func(path string) (ctLookup, error) { return conntrack.DialAt(path) },
		list: rootSpaces, budget: maxLookups, slack: forgetSlack,
		present: func() bool { _, err := os.Stat("/sys/module/nf_conntrack"); return err == nil }}
}

// rootSpaces are the host's namespaces that its root created: a
// namespace an unprivileged user made holds what that user wrote into
// its table, which must not decide whose flow a drop was.
func rootSpaces() []space {
	var out []space
	for _, f := range netns.All() {
		if f.Path == "" {
			continue
		}
		if ok, err := netns.OwnedByRoot(f.Path); err != nil || !ok {
			continue
		}
		out = append(out, space{ino: f.Inode, path: f.Path})
	}
	return out
}

// want is a tuple to search, and how much it weighs (busiest first).
type want struct {
	t conntrack.Tuple
	n uint64
}

// join returns what the conntrack tables say of c's flows: the results
// kept from earlier searches, and a search of the tuples not yet looked
// up.
func (jn *joiner) join(c *Counts) (map[conntrack.Tuple]Join, JoinStatus) {
	jn.mu.Lock()
	defer jn.mu.Unlock()
	// Only the flows not looked up yet are weighed: on a busy host the
	// tables hold thousands, and a snapshot every second.
	weight := map[conntrack.Tuple]uint64{}
	live := 0
	for _, l := range c.Ledger {
		if !l.HasCT && joinable(l.Flow) {
			live++
			if _, ok := jn.found[l.Flow]; !ok {
				weight[l.Flow] += l.Packets
			}
		}
	}
	for _, f := range c.Flows {
		if t := f.tuple(); joinable(t) {
			live++
			if _, ok := jn.found[t]; !ok {
				weight[t] += f.Skbs
			}
		}
	}
	var st JoinStatus
	if len(weight) > 0 {
		todo := make([]want, 0, len(weight))
		for t, n := range weight {
			todo = append(todo, want{t, n})
		}
		slices.SortFunc(todo, func(a, b want) int {
			if a.n != b.n {
				return cmp.Compare(b.n, a.n)
			}
			if a.t.Src != b.t.Src {
				return a.t.Src.Compare(b.t.Src)
			}
			return a.t.Dst.Compare(b.t.Dst)
		})
		st = jn.search(todo)
	}
	// Forget what left the tables, when what is kept has grown to twice
	// what they hold.
	if len(jn.found) > 2*live+jn.slack {
		keep := make(map[conntrack.Tuple]bool, live)
		for _, l := range c.Ledger {
			keep[l.Flow] = true
		}
		for _, f := range c.Flows {
			keep[f.tuple()] = true
		}
		for t := range jn.found {
			if !keep[t] {
				delete(jn.found, t)
				delete(jn.hits, t)
			}
		}
	}
	return maps.Clone(jn.hits), st
}

// joinable reports whether a flow can be looked up: TCP, UDP or SCTP
// between two addresses of one family.
func joinable(t conntrack.Tuple) bool {
	return (t.Proto == 6 || t.Proto == 17 || t.Proto == 132) && t.Valid() && t.Src.Port() != 0 && t.Dst.Port() != 0
}

// table is an open conntrack table of one namespace.
type table struct {
	ino uint64
	c   ctLookup
}

// search looks the tuples up, busiest first, within maxLookups.
func (jn *joiner) search(todo []want) JoinStatus {
	if jn.spaces == nil || time.Since(jn.listed) > nsEvery {
		jn.spaces, jn.listed = nil, time.Now()
		// Without conntrack in the kernel there is no table to search,
		// and a ctnetlink request would load the module.
		if jn.present() {
			jn.spaces = jn.list()
		}
	}
	var st JoinStatus
	var errs []string
	var tables []table
	for _, s := range jn.spaces {
		c, err := jn.dial(s.path)
		if err != nil {
			errs = append(errs, fmt.Sprintf("netns %d: %v", s.ino, err))
			continue
		}
		// A socket holds its namespace: every one is closed when the
		// search ends, never kept, so that no namespace outlives its
		// deletion for the monitor's sake.
		defer c.Close()
		g, err := c.Global()
		if err != nil {
			errs = append(errs, fmt.Sprintf("netns %d: %v", s.ino, err))
			continue
		}
		if g.Entries > 0 {
			tables = append(tables, table{s.ino, c})
		}
	}
	st.Namespaces = len(tables)
	lookups := 0
	get := func(tb table, t conntrack.Tuple) (conntrack.Entry, bool) {
		lookups++
		e, err := tb.c.Get(t)
		if err != nil && !errors.Is(err, conntrack.ErrNotFound) && len(errs) < 8 {
			errs = append(errs, fmt.Sprintf("netns %d: %v", tb.ino, err))
		}
		return e, err == nil
	}
	for i, w := range todo {
		if lookups+2*len(tables) > jn.budget {
			st.Pending = len(todo) - i
			break
		}
		r := joined{}
		if j, ok := find(tables, w.t, get, 0); ok {
			r = joined{j: j.Join, ok: true}
			// Upstream translations of what was found: the flow
			// as its client opened it.
			for range maxHops - 1 {
				if !j.nat || lookups+2*len(tables) > jn.budget {
					break
				}
				up, ok := find(tables, r.j.Orig, get, r.j.NetNS)
				if !ok {
					break
				}
				r.j.Orig, r.j.NetNS, j.nat = up.Orig, up.NetNS, up.nat
			}
		}
		jn.found[w.t] = r
		if r.ok {
			jn.hits[w.t] = r.j
		}
	}
	st.Lookups = lookups
	st.Errors = strings.Join(errs, "; ")
	return st
}

// hit is a Join with whether its entry translates.
type hit struct {
	Join
	nat bool
}

// find looks t up in every table, either way round, and returns the
// first entry that translates, else the first that holds it. Upstream
// of a translation found in namespace from (non-zero), t being that
// entry's original tuple, it looks for the translation before: in the
// other tables, an entry that translates into t (a namespace has one
// entry per connection, whatever it translates).
func find(tables []table, t conntrack.Tuple, get func(table, conntrack.Tuple) (conntrack.Entry, bool), from uint64) (hit, bool) {
	upstream := from != 0
	var plain *hit
	for _, tb := range tables {
		if upstream && tb.ino == from {
			continue
		}
		for _, q := range []conntrack.Tuple{t, t.Reverse()} {
			e, ok := get(tb, q)
			if !ok {
				continue
			}
			// t went the entry's reply way when it is its reply
			// tuple, or its original reversed.
			h := hit{Join: Join{Orig: e.Orig, Reply: t == e.Reply || t.Reverse() == e.Orig, NetNS: tb.ino}, nat: e.NAT()}
			if upstream {
				if h.nat && e.Orig != t {
					return h, true
				}
				break
			}
			if h.nat {
				return h, true
			}
			if plain == nil {
				plain = &h
			}
			break
		}
	}
	if plain != nil {
		return *plain, true
	}
	return hit{}, false
}
