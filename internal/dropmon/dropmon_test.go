package dropmon

import (
	"io"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/conntrack"
	"github.com/netdoctor/netdoctor/internal/evidence"
)

func TestReasons(t *testing.T) {
	r := newReasons(map[string]uint64{
		"SKB_DROP_REASON_NOT_SPECIFIED": 2, "SKB_DROP_REASON_NO_SOCKET": 3, "SKB_DROP_REASON_NETFILTER_DROP": 12,
		"SKB_DROP_REASON_MAX": 130, "SKB_DROP_REASON_SUBSYS_MASK": 0xffff0000, "OTHER": 7,
	})
	for v, want := range map[uint32]string{
		3: "NO_SOCKET", 12: "NETFILTER_DROP", 130: "reason 130", 7: "reason 7",
		3<<16 | 5: "subsystem 3 reason 5",
	} {
		if got := r.Name(v); got != want {
			t.Errorf("Name(%d) = %q, want %q", v, got, want)
		}
	}
}

func TestNearest(t *testing.T) {
	for _, file := range []string{"testdata/kallsyms", "testdata/kallsyms.odd"} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		got := nearest(f, []uint64{0xffffffff820331c0 + 0x91, 0xffffffff81f62a50, 0xffffffff81e62cf0 + 0x700, 0x1000, 0xffffffffc0201010})
		f.Close()
		want := []string{"tcp_v4_rcv", "nft_do_chain", "__dev_queue_xmit", "", "ftrace_trampoline"}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("%s: (-want +got)\n%s", file, d)
		}
	}
}

func TestSymbolsCache(t *testing.T) {
	opens := 0
	s := symbols{names: map[uint64]string{}, open: func() (io.ReadCloser, error) {
		opens++
		return io.NopCloser(strings.NewReader("ffffffff81000000 T a\nffffffff81000100 t b\n")), nil
	}}
	s.resolve([]uint64{0xffffffff81000010, 0xffffffff81000110})
	s.resolve([]uint64{0xffffffff81000010, 0})
	if opens != 1 {
		t.Errorf("kallsyms read %d times for addresses already named", opens)
	}
	if a, b := s.name(0xffffffff81000010), s.name(0xffffffff81000110); a != "a" || b != "b" {
		t.Errorf("names %q %q, want a b", a, b)
	}
}

func TestParseLockdown(t *testing.T) {
	for in, want := range map[string]string{"[none] integrity confidentiality\n": "none", "none [confidentiality]": "confidentiality", "": "", "none": ""} {
		if got := parseLockdown(in); got != want {
			t.Errorf("parseLockdown(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestNamespace(t *testing.T) {
	cli := netip.MustParseAddrPort("10.0.0.1:40000")
	srv := netip.MustParseAddrPort("10.0.1.2:8080")
	vip := netip.MustParseAddrPort("10.0.2.80:80")
	c := &Counts{
		Stats: [statMax]uint64{statDrops: 100, statDropsOverflow: 2, statLedgerNew: 10, statRetransNew: 3},
		Drops: []RawDrop{
			{NetNS: 7, Name: "NETFILTER_DROP", Func: "nft_do_chain", Ethertype: 0x0800, IPProto: 6, Iface: "veth0", Packets: 50, Bytes: 3000},
			{NetNS: 7, Name: "SOCKET_CLOSE", Func: "unix_release_sock", Packets: 3},
			{NetNS: 9, Name: "PKT_TOO_BIG", Func: "ip_forward", Ethertype: 0x0800, IPProto: 6, Iface: "r0", Packets: 40},
			// Two call sites of one function: one place.
			{NetNS: 7, Name: "NOT_SPECIFIED", Func: "ip6_mc_input", Location: 1, Ethertype: 0x86dd, IPProto: 58, Iface: "veth0", Packets: 2},
			{NetNS: 7, Name: "NOT_SPECIFIED", Func: "ip6_mc_input", Location: 2, Ethertype: 0x86dd, IPProto: 58, Iface: "veth0", Packets: 1},
		},
		Ports: []RawDrop{
			{NetNS: 7, Name: "NETFILTER_DROP", Func: "nft_do_chain", Ethertype: 0x0800, IPProto: 6, Iface: "veth0", Port: 80, Packets: 45},
			{NetNS: 7, Name: "NETFILTER_DROP", Func: "nft_do_chain", Ethertype: 0x0800, IPProto: 6, Iface: "veth0", Port: 443, Socket: true, Packets: 5},
		},
		Ledger: []RawLedger{
			// The server's listener dropped its client's ACK: no entry
			// on the packet, the flow found in the router's table.
			{NetNS: 7, Name: "TCP_LISTEN_OVERFLOW", Func: "tcp_v4_rcv", Ifindex: 2, Iface: "veth0", Ethertype: 0x0800, IPProto: 6,
				Flow: conntrack.Tuple{Proto: 6, Src: cli, Dst: srv}, SockPort: 8080, Packets: 4, Bytes: 240, MaxLen: 60},
			// One function's two call sites: one row.
			{NetNS: 7, Name: "NO_SOCKET", Func: "tcp_v4_rcv", Location: 10, Ifindex: 2, Iface: "veth0",
				Flow: conntrack.Tuple{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.9:1"), Dst: srv}, Packets: 1, Bytes: 40, MaxLen: 40},
			{NetNS: 7, Name: "NO_SOCKET", Func: "tcp_v4_rcv", Location: 11, Ifindex: 2, Iface: "veth0",
				Flow: conntrack.Tuple{Proto: 6, Src: netip.MustParseAddrPort("10.0.0.9:1"), Dst: srv}, Packets: 1, Bytes: 60, MaxLen: 60},
			// A firewall's drop, with the packet's own entry.
			{NetNS: 7, Name: "NETFILTER_DROP", Func: "nft_do_chain", Ifindex: 2, Iface: "veth0", Ethertype: 0x0800, IPProto: 6,
				Flow: conntrack.Tuple{Proto: 6, Src: srv, Dst: cli}, HasCT: true, CTReply: true,
				CT: conntrack.Tuple{Proto: 6, Src: cli, Dst: vip}, Packets: 6, Bytes: 360, MaxLen: 60},
			// Elsewhere: another namespace's unrelated drop, busier,
			// and one of this namespace's flows, to be listed first.
			{NetNS: 9, Name: "IP_OUTNOROUTES", Func: "__ip_queue_xmit", FromSock: true, SockPort: 8080,
				Flow: conntrack.Tuple{Proto: 6, Src: netip.MustParseAddrPort("10.9.0.1:8080"), Dst: netip.MustParseAddrPort("10.9.0.2:5000")}, Packets: 90},
			{NetNS: 9, Name: "TCP_OLD_DATA", Func: "tcp_rcv_established",
				Flow: conntrack.Tuple{Proto: 6, Src: vip, Dst: cli}, SockPort: 40000, Packets: 1},
		},
		Flows: []RawFlow{
			{NetNS: 7, Family: 2, Sport: 80, Dport: 40000, Saddr: [16]byte{10, 0, 0, 2}, Daddr: [16]byte{10, 0, 0, 1}, Skbs: 9, Full: 9, MaxLen: 1448, MSS: 1448},
			{NetNS: 9, Family: 10, Sport: 1, Dport: 2, Skbs: 5},
			{NetNS: 9, Family: 2, Sport: 40000, Dport: 80, Saddr: [16]byte{10, 0, 0, 1}, Daddr: [16]byte{10, 0, 2, 80}, Skbs: 1},
		},
		LedgerSize: 16, RetransSize: 8,
		Joins: map[conntrack.Tuple]Join{
			{Proto: 6, Src: cli, Dst: srv}: {Orig: conntrack.Tuple{Proto: 6, Src: cli, Dst: vip}, NetNS: 8},
			{Proto: 6, Src: cli, Dst: vip}: {Orig: conntrack.Tuple{Proto: 6, Src: cli, Dst: vip}, NetNS: 8},
		},
		JoinStatus: JoinStatus{Namespaces: 1, Lookups: 4},
	}
	orig := &evidence.Flow{Proto: "tcp", Src: "10.0.0.1:40000", Dst: "10.0.2.80:80"}
	got := c.Namespace(7, map[uint64]string{9: "router", 8: "nat"})
	want := &evidence.Drops{Seen: 100, Overflow: 2,
		Counts: []evidence.Drop{
			{Reason: "NETFILTER_DROP", Location: "nft_do_chain", Proto: "tcp", Iface: "veth0", Packets: 50, Bytes: 3000,
				Ports: []evidence.DropPort{{Port: 80, Packets: 45}, {Port: 443, Socket: true, Packets: 5}}},
			{Reason: "NOT_SPECIFIED", Location: "ip6_mc_input", Proto: "icmpv6", Iface: "veth0", Packets: 3},
			{Reason: "SOCKET_CLOSE", Location: "unix_release_sock", Packets: 3},
		},
		Elsewhere: []evidence.Drop{{Reason: "PKT_TOO_BIG", Location: "ip_forward", Proto: "tcp", Iface: "r0", NetNS: 9, NetNSName: "router", Packets: 40}},
		Retrans:   []evidence.Retrans{{Local: "10.0.0.2:80", Remote: "10.0.0.1:40000", Segments: 9, Full: 9, MaxLen: 1448, MSS: 1448}},
		Ledger: []evidence.FlowDrop{
			{Reason: "NETFILTER_DROP", Location: "nft_do_chain", Iface: "veth0", Ifindex: 2,
				Flow: evidence.Flow{Proto: "tcp", Src: "10.0.1.2:8080", Dst: "10.0.0.1:40000"}, Orig: orig, Reply: true, Via: "skb",
				Packets: 6, Bytes: 360, MaxLen: 60},
			{Reason: "TCP_LISTEN_OVERFLOW", Location: "tcp_v4_rcv", Iface: "veth0", Ifindex: 2,
				Flow: evidence.Flow{Proto: "tcp", Src: "10.0.0.1:40000", Dst: "10.0.1.2:8080"}, SocketPort: 8080,
				Orig: orig, Via: "conntrack", ViaNetNS: 8, ViaNetNSName: "nat", Packets: 4, Bytes: 240, MaxLen: 60},
			{Reason: "NO_SOCKET", Location: "tcp_v4_rcv", Iface: "veth0", Ifindex: 2,
				Flow: evidence.Flow{Proto: "tcp", Src: "10.0.0.9:1", Dst: "10.0.1.2:8080"}, Packets: 2, Bytes: 100, MaxLen: 60},
		},
		LedgerElsewhere: []evidence.FlowDrop{
			{Reason: "TCP_OLD_DATA", Location: "tcp_rcv_established", NetNS: 9, NetNSName: "router",
				Flow: evidence.Flow{Proto: "tcp", Src: "10.0.2.80:80", Dst: "10.0.0.1:40000"}, SocketPort: 40000, Packets: 1},
			{Reason: "IP_OUTNOROUTES", Location: "__ip_queue_xmit", NetNS: 9, NetNSName: "router",
				Flow: evidence.Flow{Proto: "tcp", Src: "10.9.0.1:8080", Dst: "10.9.0.2:5000"}, FromSocket: true, SocketPort: 8080, Packets: 90},
		},
		RetransElsewhere: []evidence.Retrans{
			{Local: "10.0.0.1:40000", Remote: "10.0.2.80:80", NetNS: 9, NetNSName: "router", Orig: orig, Via: "conntrack", ViaNetNS: 8, ViaNetNSName: "nat", Segments: 1},
			{Local: "[::]:1", Remote: "[::]:2", NetNS: 9, NetNSName: "router", Segments: 5},
		},
		LedgerTable:  &evidence.FlowTable{Size: 16, Rows: 6, Inserted: 10, Evicted: 4},
		RetransTable: &evidence.FlowTable{Size: 8, Rows: 3, Inserted: 3},
		Join:         &evidence.FlowJoin{Namespaces: 1, Lookups: 4},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// TestPortDrops: the drops' ports are summed from the ledger's flows as
// the port table counted them: the local socket's port, else the
// packet's destination port, or its source port when only that one is
// below the ephemeral range (a server's reply); a flow without ports
// counts for none.
func TestPortDrops(t *testing.T) {
	at := func(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
	c := &Counts{
		Drops: []RawDrop{{NetNS: 7, Ifindex: 2, Iface: "veth0"}},
		Ledger: []RawLedger{
			{NetNS: 7, Name: "NO_SOCKET", Ifindex: 2, Flow: conntrack.Tuple{Proto: 17, Src: at("10.0.0.1:40000"), Dst: at("10.0.0.2:53")}, Packets: 2},
			{NetNS: 7, Name: "NO_SOCKET", Ifindex: 2, Flow: conntrack.Tuple{Proto: 17, Src: at("10.0.0.3:40001"), Dst: at("10.0.0.2:53")}, Packets: 3},
			{NetNS: 7, Name: "QDISC_DROP", Ifindex: 2, Flow: conntrack.Tuple{Proto: 6, Src: at("10.0.0.2:80"), Dst: at("10.0.0.1:40000")}, Packets: 4},
			{NetNS: 7, Name: "TCP_LISTEN_OVERFLOW", Ifindex: 2, SockPort: 8080, Flow: conntrack.Tuple{Proto: 6, Src: at("10.0.0.1:40000"), Dst: at("10.0.0.2:8080")}, Packets: 1},
			{NetNS: 7, Name: "NOT_SPECIFIED", Ifindex: 2, Flow: conntrack.Tuple{Proto: 1, Src: at("10.0.0.1:0"), Dst: at("10.0.0.2:0")}, Packets: 1},
		},
	}
	c.nameDevices()
	got := c.portDrops()
	want := []RawDrop{
		{NetNS: 7, Name: "NO_SOCKET", Ifindex: 2, Iface: "veth0", Port: 53, Packets: 5},
		{NetNS: 7, Name: "QDISC_DROP", Ifindex: 2, Iface: "veth0", Port: 80, SrcPort: true, Packets: 4},
		{NetNS: 7, Name: "TCP_LISTEN_OVERFLOW", Ifindex: 2, Iface: "veth0", Port: 8080, Socket: true, Packets: 1},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

func TestProto(t *testing.T) {
	for _, c := range []struct {
		eth  uint16
		ip   uint8
		want string
	}{{0x0800, 6, "tcp"}, {0x86dd, 17, "udp"}, {0x86dd, 58, "icmpv6"}, {0x0800, 0, "ipv4"}, {0x0800, 47, "ip proto 47"}, {0x0806, 0, "arp"}, {0, 0, ""}, {0x88cc, 0, "0x88cc"}} {
		if got := proto(c.eth, c.ip); got != c.want {
			t.Errorf("proto(%#x, %d) = %q, want %q", c.eth, c.ip, got, c.want)
		}
	}
}

// FuzzNearest: /proc/kallsyms is parsed line by line; any bytes name
// each address or leave it unnamed, never panic.
func FuzzNearest(f *testing.F) {
	for _, file := range []string{"testdata/kallsyms", "testdata/kallsyms.odd"} {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, uint64(0xffffffff820331c0))
	}
	f.Fuzz(func(t *testing.T, b []byte, addr uint64) {
		if got := nearest(strings.NewReader(string(b)), []uint64{addr}); len(got) != 1 {
			t.Fatalf("%d names for one address", len(got))
		}
	})
}

// TestFirst: the bounded choice gives what a sort would.
func TestFirst(t *testing.T) {
	var rows []int
	for i := range 1000 {
		rows = append(rows, (i*7919)%1009)
	}
	sorted := slices.Clone(rows)
	slices.Sort(sorted)
	for _, n := range []int{0, 1, 5, 128, 999, 1000, 2000} {
		got := first(slices.Clone(rows), n, func(a, b int) int { return a - b })
		if want := sorted[:min(n, len(sorted))]; !slices.Equal(got, want) {
			t.Errorf("first %d: %v, want %v", n, got, want)
		}
	}
}
