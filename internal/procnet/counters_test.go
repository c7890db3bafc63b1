package procnet

import (
	"errors"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

// pick returns the entries of m whose keys are in want, so that a test
// can compare a few counters of a map of hundreds.
func pick[V any](m map[string]V, want map[string]V) map[string]V {
	got := make(map[string]V, len(want))
	for k := range want {
		if v, ok := m[k]; ok {
			got[k] = v
		}
	}
	return got
}

func TestCounters(t *testing.T) {
	tests := []struct {
		dir     string
		wantLen int
		want    map[string]uint64
	}{{
		dir:     "host",
		wantLen: 401,
		want: map[string]uint64{
			"Tcp.ActiveOpens":         17,
			"Tcp.RtoMax":              120000,
			"TcpExt.ListenOverflows":  0,
			"TcpExt.TW":               15,
			"IpExt.InOctets":          13321221,
			"IcmpMsg.InType3":         1,
			"Ip6.InReceives":          1,
			"Icmp6.OutMsgs":           9,
			"UdpLite6.InDatagrams":    0,
			"MPTcpExt.MPCapableSYNRX": 0,
		},
	}, {
		dir:     "busy",
		wantLen: 398,
		want: map[string]uint64{
			"TcpExt.ListenOverflows": 36,
			"TcpExt.ListenDrops":     36,
			"TcpExt.TCPSynRetrans":   18,
			"TcpExt.TW":              5,
			"Tcp.RetransSegs":        18,
			"Tcp.CurrEstab":          4,
			"Udp.RcvbufErrors":       49,
			"Udp.NoPorts":            5,
			"IcmpMsg.InType3":        5,
			"IcmpMsg.OutType3":       5,
			"IpExt.InOctets":         34594,
			"Ip6.InReceives":         0,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := fixture(tt.dir).Counters()
			checkErr(t, "Counters()", err, false)
			if diff := cmp.Diff(tt.want, pick(got, tt.want)); diff != "" {
				t.Errorf("Counters() mismatch (-want +got):\n%s", diff)
			}
			if len(got) != tt.wantLen {
				t.Errorf("len(Counters()) = %d, want %d", len(got), tt.wantLen)
			}
			if v, ok := got["Tcp.MaxConn"]; ok {
				t.Errorf("Counters()[Tcp.MaxConn] = %d, want absent (the kernel prints -1)", v)
			}
		})
	}
}

func TestCountersTruncated(t *testing.T) {
	got, err := fixture("truncated").Counters()
	checkErr(t, "Counters()", err, true)
	// The groups of net/snmp around the headless Tcp group, and the first
	// ten lines of net/snmp6.
	want := map[string]uint64{
		"Ip.InReceives":        649,
		"Icmp.InDestUnreachs":  1,
		"IcmpMsg.InType3":      1,
		"Udp.InDatagrams":      21,
		"UdpLite.MemErrors":    0,
		"Ip6.InReceives":       1,
		"Ip6.OutForwDatagrams": 0,
	}
	if diff := cmp.Diff(want, pick(got, want)); diff != "" {
		t.Errorf("Counters() mismatch (-want +got):\n%s", diff)
	}
	if len(got) != 20+29+1+9+9+10 {
		t.Errorf("len(Counters()) = %d, want %d", len(got), 20+29+1+9+9+10)
	}
	for k := range got {
		if strings.HasPrefix(k, "Tcp.") || strings.HasPrefix(k, "TcpExt.") || k == "Ip6.OutRequests" {
			t.Errorf("Counters() has %s, want it left out as damaged", k)
		}
	}
	for _, part := range []string{"net/snmp line 7: Tcp: header without a value line", "net/netstat", "net/snmp6 line 11"} {
		if !strings.Contains(err.Error(), part) {
			t.Errorf("Counters() error = %q, want it to mention %q", err, part)
		}
	}
}

func TestCountersMissingFiles(t *testing.T) {
	// The v4.19 fixture has a netstat but no snmp and no snmp6: the
	// netstat counters still come back, with the snmp read error.
	got, err := fixture("old/v4.19").Counters()
	if !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrParse) {
		t.Errorf("Counters() error = %v, want only fs.ErrNotExist", err)
	}
	want := map[string]uint64{"TcpExt.ListenOverflows": 36, "TcpExt.TCPAckCompressed": 0, "IpExt.InOctets": 34594}
	if diff := cmp.Diff(want, pick(got, want)); diff != "" {
		t.Errorf("Counters() mismatch (-want +got):\n%s", diff)
	}
	if len(got) != 114+17 {
		t.Errorf("len(Counters()) = %d, want %d", len(got), 114+17)
	}

	// No snmp6 (IPv6 disabled) is not an error.
	p := Proc{FS: fstest.MapFS{
		"net/snmp":    {Data: []byte("Tcp: RtoAlgorithm MaxConn\nTcp: 1 -1\n")},
		"net/netstat": {Data: []byte("TcpExt: ListenOverflows\nTcpExt: 3\n")},
	}, Net: "net"}
	got, err = p.Counters()
	checkErr(t, "Counters()", err, false)
	if diff := cmp.Diff(map[string]uint64{"Tcp.RtoAlgorithm": 1, "TcpExt.ListenOverflows": 3}, got); diff != "" {
		t.Errorf("Counters() mismatch (-want +got):\n%s", diff)
	}
}

func TestParsePaired(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      map[string]uint64
		wantParse bool
	}{
		{"empty", "", map[string]uint64{}, false},
		{"negative left out", "Tcp: RtoAlgorithm MaxConn\nTcp: 1 -1\n",
			map[string]uint64{"Tcp.RtoAlgorithm": 1}, false},
		{"group in two pairs", "IcmpMsg: InType3 OutType3\nIcmpMsg: 1 2\nIcmpMsg: InType8\nIcmpMsg: 5\n",
			map[string]uint64{"IcmpMsg.InType3": 1, "IcmpMsg.OutType3": 2, "IcmpMsg.InType8": 5}, false},
		{"big values", "IpExt: InOctets\nIpExt: 18446744073709551615\n",
			map[string]uint64{"IpExt.InOctets": 18446744073709551615}, false},
		{"count mismatch", "A: x y\nA: 1\nB: z\nB: 3\n", map[string]uint64{"B.z": 3}, true},
		{"header without values", "A: x\nB: y\nB: 2\n", map[string]uint64{"B.y": 2}, true},
		{"header without values at the end", "A: x\nA: 1\nB: y\n", map[string]uint64{"A.x": 1}, true},
		{"values without header", "A: 1 2\nB: y\nB: 2\n", map[string]uint64{"B.y": 2}, true},
		{"values of another group", "A: x\nB: 1\nB: y\nB: 2\n", map[string]uint64{"B.y": 2}, true},
		{"bad value", "A: x y z\nA: 1 zz 3\n", map[string]uint64{"A.x": 1, "A.z": 3}, true},
		{"overflow", "A: x\nA: 18446744073709551616\n", map[string]uint64{}, true},
		{"no colon", "A: x\nA: 1\ngarbage\n", map[string]uint64{"A.x": 1}, true},
		{"bad group name", "A B: x\nA B: 1\n", map[string]uint64{}, true},
		{"empty group name", ": x\n: 1\n", map[string]uint64{}, true},
		{"space before colon", "A : x\nA : 1\n", map[string]uint64{}, true},
		{"blank lines", "\nA: x\nA: 1\n\n", map[string]uint64{"A.x": 1}, false},
		{"truncated value line", "A: x\nA: 1\nB: y\nB: 12", map[string]uint64{"A.x": 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]uint64{}
			err := parsePaired([]byte(tt.in), "net/test", got)
			checkErr(t, "parsePaired()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parsePaired() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSnmp6(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      map[string]uint64
		wantParse bool
	}{
		{"groups", "Ip6InReceives                   \t12\nIcmp6InType133 3\nUdp6NoPorts 4\nUdpLite6InErrors 5\n",
			map[string]uint64{"Ip6.InReceives": 12, "Icmp6.InType133": 3, "Udp6.NoPorts": 4, "UdpLite6.InErrors": 5}, false},
		{"no group", "InReceives 1\nIp6InDelivers 2\n", map[string]uint64{"Ip6.InDelivers": 2}, true},
		{"nothing after the group", "Ip6 1\n", map[string]uint64{}, true},
		{"no value", "Ip6InReceives\n", map[string]uint64{}, true},
		{"extra field", "Ip6InReceives 1 2\n", map[string]uint64{}, true},
		{"truncated", "Ip6InReceives 1\nIp6InDelivers 2", map[string]uint64{"Ip6.InReceives": 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]uint64{}
			err := parseSnmp6([]byte(tt.in), got)
			checkErr(t, "parseSnmp6()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseSnmp6() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func BenchmarkCounters(b *testing.B) {
	p := fixture("host")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Counters(); err != nil {
			b.Fatal(err)
		}
	}
}
