package dropmon

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/netdoctor/netdoctor/internal/conntrack"
)

// fakeTable is a conntrack table: its entries, found by either tuple.
type fakeTable struct {
	entries []conntrack.Entry
	gets    *int
}

func (f fakeTable) Global() (conntrack.Global, error) {
	return conntrack.Global{Entries: uint64(len(f.entries))}, nil
}

func (f fakeTable) Get(t conntrack.Tuple) (conntrack.Entry, error) {
	*f.gets++
	for _, e := range f.entries {
		if e.Orig == t || e.Reply == t {
			return e, nil
		}
	}
	return conntrack.Entry{}, conntrack.ErrNotFound
}

func (f fakeTable) Close() error { return nil }

func tcp(src, dst string) conntrack.Tuple {
	return conntrack.Tuple{Proto: 6, Src: netip.MustParseAddrPort(src), Dst: netip.MustParseAddrPort(dst)}
}

// fakeJoiner searches tables by inode, each its own namespace.
func fakeJoiner(tables map[uint64]fakeTable) *joiner {
	jn := newJoiner()
	jn.list = func() []space {
		var out []space
		for ino := range tables {
			out = append(out, space{ino: ino, path: string(rune('a' + ino))})
		}
		return out
	}
	jn.dial = func(path string) (ctLookup, error) { return tables[uint64(path[0]-'a')], nil }
	jn.present = func() bool { return true }
	return jn
}

// TestJoin: a client (C) reaches an edge's address (EDGE:80), which the
// edge's namespace DNATs to a service's address (VIP:80), which a
// router's namespace DNATs to the server (S:8080); the client's own
// namespace tracks the connection too, untranslated. The server's drop
// of the client's packet (C → S) and its retransmission to the client
// (S → C) are both followed to the flow the client opened: C → EDGE,
// the second the reply way. A flow no table holds is not joined, and
// is not asked again; a flow that left the counts is forgotten.
func TestJoin(t *testing.T) {
	c, edge, vip, s := "10.0.0.1:40000", "192.0.2.1:80", "10.1.0.80:80", "10.2.0.2:8080"
	gets := 0
	tables := map[uint64]fakeTable{
		1: {entries: []conntrack.Entry{{Orig: tcp(c, edge), Reply: tcp(edge, c)}}, gets: &gets},
		2: {entries: []conntrack.Entry{{Orig: tcp(c, edge), Reply: tcp(vip, c)}}, gets: &gets},
		3: {entries: []conntrack.Entry{{Orig: tcp(c, vip), Reply: tcp(s, c)}}, gets: &gets},
	}
	jn := fakeJoiner(tables)
	toServer, toClient, stranger := tcp(c, s), tcp(s, c), tcp("10.9.9.9:1", "10.9.9.8:2")
	counts := &Counts{
		Ledger: []RawLedger{{Flow: toServer, Packets: 3}, {Flow: stranger, Packets: 1}},
		Flows:  []RawFlow{{Family: afInet, Sport: 8080, Dport: 40000, Saddr: [16]byte{10, 2, 0, 2}, Daddr: [16]byte{10, 0, 0, 1}, Skbs: 2}},
	}
	got, st := jn.join(counts)
	want := map[conntrack.Tuple]Join{
		toServer: {Orig: tcp(c, edge), NetNS: 2},
		toClient: {Orig: tcp(c, edge), Reply: true, NetNS: 2},
	}
	if !maps.Equal(want, got) {
		t.Errorf("joined %v, want %v", got, want)
	}
	if st.Namespaces != 3 || st.Pending != 0 || st.Errors != "" || st.Lookups != gets {
		t.Errorf("status %+v after %d lookups", st, gets)
	}

	// Known flows are not asked again, the stranger included.
	before := gets
	again, st := jn.join(counts)
	if gets != before || st.Lookups != 0 || len(again) != 2 {
		t.Errorf("a second search made %d lookups (status %+v) and found %v", gets-before, st, again)
	}
	// A flow gone from the tables is forgotten (once the results kept
	// outnumber twice the flows counted, and the slack).
	jn.slack = 0
	jn.join(&Counts{Ledger: []RawLedger{{Flow: toServer, Packets: 1}}})
	if _, ok := jn.found[toClient]; ok {
		t.Error("a flow no longer counted is still kept")
	}
}

// TestJoinBudget: a search stops at its budget and says how many flows
// it left; the next one takes them.
func TestJoinBudget(t *testing.T) {
	gets := 0
	jn := fakeJoiner(map[uint64]fakeTable{1: {entries: []conntrack.Entry{{Orig: tcp("10.0.0.1:1", "10.0.0.2:2"), Reply: tcp("10.0.0.2:2", "10.0.0.1:1")}}, gets: &gets}})
	jn.budget = 10
	var c Counts
	for i := range 20 {
		c.Ledger = append(c.Ledger, RawLedger{Flow: tcp("10.0.0.1:1", netip.AddrPortFrom(netip.MustParseAddr("10.0.0.3"), uint16(1000+i)).String()), Packets: 1})
	}
	_, st := jn.join(&c)
	if st.Lookups > 10 || st.Pending != 20-st.Lookups/2 {
		t.Errorf("status %+v with a budget of 10 lookups", st)
	}
	_, st2 := jn.join(&c)
	if st2.Pending != st.Pending-st2.Lookups/2 {
		t.Errorf("the next search %+v after %+v", st2, st)
	}
}
