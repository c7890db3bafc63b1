package conntrack

import (
	"net/netip"
	"os"
	"testing"

	"github.com/mdlayher/netlink"
)

// TestDecodeEntry reads the kernel's answer to a get, captured from
// TestGet's namespace (strace of the reply to IPCTNL_MSG_CT_GET): a UDP
// datagram to 127.0.0.2:9999 that nftables DNATs to 127.0.0.1:9998.
func TestDecodeEntry(t *testing.T) {
	b, err := os.ReadFile("testdata/entry-udp-dnat")
	if err != nil {
		t.Fatal(err)
	}
	e, err := DecodeEntry(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Entry{
		Orig:   Tuple{Proto: 17, Src: netip.MustParseAddrPort("127.0.0.1:35752"), Dst: netip.MustParseAddrPort("127.0.0.2:9999")},
		Reply:  Tuple{Proto: 17, Src: netip.MustParseAddrPort("127.0.0.1:9998"), Dst: netip.MustParseAddrPort("127.0.0.1:35752")},
		Status: 0x1a8,
	}
	if e != want {
		t.Errorf("DecodeEntry = %+v, want %+v", e, want)
	}
	if !e.NAT() {
		t.Error("a DNAT'd entry does not translate")
	}
	b, _ = os.ReadFile("testdata/entry-truncated")
	if _, err := DecodeEntry(b); err == nil {
		t.Error("a truncated entry decoded")
	}
	if _, err := DecodeEntry(b[:2]); err == nil {
		t.Error("two bytes decoded")
	}
}

// TestEncodeGet: the request carries the tuple as CTA_TUPLE_ORIG, its
// family in the header, for IPv4 and IPv6; a tuple of two families is
// refused.
func TestEncodeGet(t *testing.T) {
	for _, tu := range []Tuple{
		{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.1:40000"), Dst: netip.MustParseAddrPort("10.0.0.2:80")},
		{Proto: 17, Src: netip.MustParseAddrPort("[fd00::1]:53"), Dst: netip.MustParseAddrPort("[fd00::2]:40000")},
	} {
		b, err := EncodeGet(tu)
		if err != nil {
			t.Fatal(err)
		}
		wantFamily := byte(2)
		if tu.Src.Addr().Is6() {
			wantFamily = 10
		}
		if b[0] != wantFamily {
			t.Errorf("%v: family %d", tu, b[0])
		}
		ad, err := netlink.NewAttributeDecoder(b[4:])
		if err != nil {
			t.Fatal(err)
		}
		var got Tuple
		for ad.Next() {
			if ad.Type() == ctaTupleOrig {
				ad.Nested(func(nad *netlink.AttributeDecoder) error { return decodeTuple(nad, &got) })
			}
		}
		if err := ad.Err(); err != nil || got != tu {
			t.Errorf("encoded %v, decoded %v (%v)", tu, got, err)
		}
	}
	mixed := Tuple{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.1:1"), Dst: netip.MustParseAddrPort("[fd00::2]:2")}
	if _, err := EncodeGet(mixed); err == nil {
		t.Error("a tuple of two families was encoded")
	}
	if r := mixed.Reverse(); r.Src != mixed.Dst || r.Dst != mixed.Src {
		t.Errorf("Reverse = %v", r)
	}
}

// FuzzDecodeEntry: what ctnetlink answers is decoded or refused, never
// a panic, and an entry decoded has both its tuples.
func FuzzDecodeEntry(f *testing.F) {
	for _, file := range []string{"testdata/entry-udp-dnat", "testdata/entry-truncated"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEntry(b)
		if err == nil && (!e.Orig.Valid() || !e.Reply.Valid()) {
			t.Fatalf("decoded an entry without its tuples: %+v", e)
		}
	})
}
