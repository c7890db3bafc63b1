package nftables

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
)

// The expressions below are what the kernel returned for rules made by
// nft 1.0.6 and iptables-nft 1.8.9 on Debian 12 (kernel 6.18), as
// google/nftables decodes them.
func TestDecode(t *testing.T) {
	le := binary.NativeEndian
	limitInfo := make([]byte, 32) // xt_rateinfo: avg 1000 (10/s), burst 5
	le.PutUint32(limitInfo, 1000)
	le.PutUint32(limitInfo[4:], 5)
	statInfo := make([]byte, 24) // xt_statistic_info: random 0.1
	le.PutUint32(statInfo[4:], 214748365)
	hashInfo := make([]byte, 16+48) // xt_hashlimit_mtinfo3 "x": above 5/s burst 5
	copy(hashInfo, "x")
	le.PutUint64(hashInfo[16:], 200000)
	le.PutUint64(hashInfo[24:], 5)
	le.PutUint32(hashInfo[32:], 0x10|0x02)
	for _, c := range []struct {
		name      string
		family    byte
		exprs     []expr.Any
		nft, ipt  string
		verdict   string
		limit     string
		discarded bool
	}{
		{"nft rate limit over", famInet, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, &expr.Cmp{Register: 1, Data: []byte{0, 80}},
			&expr.Ct{Register: 1, Key: expr.CtKeySTATE}, &expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{8, 0, 0, 0}, Xor: []byte{0, 0, 0, 0}},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: []byte{0, 0, 0, 0}},
			&expr.Limit{Rate: 10, Over: true, Unit: expr.LimitTimeSecond, Burst: 5}, &expr.Counter{Packets: 7, Bytes: 420}, &expr.Verdict{Kind: expr.VerdictDrop},
		}, "tcp dport 80 ct state new limit rate over 10/second drop", "", "drop", "10/second", true},
		{"nft reject", famInet, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{17}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, &expr.Cmp{Register: 1, Data: []byte{0, 53}},
			&expr.Counter{}, &expr.Reject{Type: 2, Code: 1},
		}, "udp dport 53 reject", "", "reject", "", true},
		{"nft prefix and set", famInet, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{2}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 1}, &expr.Cmp{Register: 1, Data: []byte{10}},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, &expr.Lookup{SourceRegister: 1, SetName: "__set0"},
			&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
		}, "ip saddr 10.0.0.0/8 tcp dport { 22, 443 } drop", "", "drop", "", true},
		{"nft icmp", famInet, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{1}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1}, &expr.Cmp{Register: 1, Data: []byte{3}},
			&expr.Verdict{Kind: expr.VerdictDrop},
		}, "icmp type destination-unreachable drop", "", "drop", "", true},
		{"iptables syn limit accept", famIPv4, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 13, Len: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 1, Mask: []byte{23}, Xor: []byte{0}}, &expr.Cmp{Register: 1, Data: []byte{2}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, &expr.Cmp{Register: 1, Data: []byte{31, 144}},
			&expr.Limit{Rate: 10, Unit: expr.LimitTimeSecond, Burst: 5}, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictAccept},
		}, "tcp flags syn / fin,syn,rst,ack tcp dport 8080 limit rate 10/second accept", "-p tcp --syn --dport 8080 -m limit --limit 10/s --limit-burst 5 -j ACCEPT", "accept", "10/second", true},
		{"iptables statistic", famIPv4, []expr.Any{
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1}, &expr.Cmp{Register: 1, Data: []byte{6}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2}, &expr.Cmp{Register: 1, Data: []byte{35, 130}},
			&expr.Match{Name: "statistic", Info: &xt.Unknown{}}, &expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop},
		}, "tcp dport 9090 xt match statistic drop", "-p tcp --dport 9090 -m statistic -j DROP", "drop", "", true},
		{"iptables xt limit", famIPv4, []expr.Any{&expr.Match{Name: "limit", Info: ptr(xt.Unknown(limitInfo))}, &expr.Verdict{Kind: expr.VerdictAccept}},
			"limit rate 10/second burst 5 packets accept", "-m limit --limit 10/s --limit-burst 5 -j ACCEPT", "accept", "10/second burst 5 packets", true},
		{"iptables xt statistic", famIPv4, []expr.Any{&expr.Match{Name: "statistic", Info: ptr(xt.Unknown(statInfo))}, &expr.Verdict{Kind: expr.VerdictDrop}},
			"statistic random probability 0.1 drop", "-m statistic --mode random --probability 0.1 -j DROP", "drop", "", true},
		{"iptables hashlimit reject", famIPv4, []expr.Any{
			&expr.Match{Name: "conntrack", Rev: 3, Info: &xt.ConntrackMtinfo3{ConntrackMtinfo2: xt.ConntrackMtinfo2{ConntrackMtinfoBase: xt.ConntrackMtinfoBase{MatchFlags: 1}, StateMask: 8}}},
			&expr.Match{Name: "hashlimit", Rev: 3, Info: ptr(xt.Unknown(hashInfo))}, &expr.Counter{}, &expr.Target{Name: "REJECT"},
		}, "ct state new limit rate over 5/second burst 5 packets (per x hash) reject", "-m conntrack --ctstate NEW -m hashlimit --hashlimit-above 5/s --hashlimit-burst 5 --hashlimit-name x -j REJECT", "reject", "5/second burst 5 packets (per x hash)", true},
		{"accept only", famInet, []expr.Any{&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1}, &expr.Cmp{Register: 1, Data: []byte("lo\x00")}, &expr.Verdict{Kind: expr.VerdictAccept}},
			`iifname "lo" accept`, "-i \"lo\" -j ACCEPT", "accept", "", false},
	} {
		d := decode(c.family, c.exprs, func(name string) []string {
			if name == "__set0" {
				return []string{"22", "443"}
			}
			return nil
		})
		if got := strings.Join(d.nft, " "); got != c.nft {
			t.Errorf("%s: nft %q, want %q", c.name, got, c.nft)
		}
		if got := strings.Join(d.ipt, " "); c.ipt != "" && got != c.ipt {
			t.Errorf("%s: iptables %q, want %q", c.name, got, c.ipt)
		}
		if d.verdict != c.verdict || d.limit != c.limit || discards(d) != c.discarded {
			t.Errorf("%s: verdict %q limit %q discards %v, want %q %q %v", c.name, d.verdict, d.limit, discards(d), c.verdict, c.limit, c.discarded)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestPrefixLen(t *testing.T) {
	for _, c := range []struct {
		mask []byte
		n    int
		ok   bool
	}{{[]byte{255, 0, 0, 0}, 8, true}, {[]byte{255, 255, 255, 255}, 32, false}, {[]byte{0xf0, 0xff}, 0, false}, {nil, 0, false}} {
		if n, ok := prefixLen(c.mask); n != c.n || ok != c.ok {
			t.Errorf("prefixLen(%v) = %d %v, want %d %v", c.mask, n, ok, c.n, c.ok)
		}
	}
}

// FuzzXtMatch: the xt matches' payloads come from the kernel but are
// decoded by offsets of structs netdoctor declares: any bytes give an
// answer or none, never a panic.
func FuzzXtMatch(f *testing.F) {
	for _, seed := range [][]byte{make([]byte, 32), make([]byte, 64), {1, 2, 3}, nil} {
		for _, name := range []string{"limit", "hashlimit", "statistic", "icmp"} {
			f.Add(name, uint32(3), seed)
		}
	}
	f.Fuzz(func(t *testing.T, name string, rev uint32, b []byte) {
		xtMatch(name, rev, b)
	})
}
