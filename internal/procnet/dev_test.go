package procnet

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

func TestDev(t *testing.T) {
	tests := []struct {
		dir       string
		want      []kernel.Interface
		wantParse bool
	}{{
		dir: "host",
		want: []kernel.Interface{
			{Name: "lo", RxBytes: 3193, RxPackets: 29, TxBytes: 3193, TxPackets: 29},
			{Name: "ifb0"},
			{Name: "ifb1"},
			{Name: "eth0", RxBytes: 13326934, RxPackets: 623, TxBytes: 59840, TxPackets: 512},
		},
	}, {
		dir:  "busy",
		want: []kernel.Interface{{Name: "lo", RxBytes: 34594, RxPackets: 142, TxBytes: 34594, TxPackets: 142}},
	}, {
		dir: "odd",
		want: []kernel.Interface{
			{Name: "lo", RxBytes: 3193, RxPackets: 29, TxBytes: 3193, TxPackets: 29},
			{Name: "br-4f2a9c1d7e3b", RxBytes: 20480117, RxPackets: 150003, RxDrop: 12, TxBytes: 981234567, TxPackets: 120456},
			{
				Name:    "eth0.100",
				RxBytes: 123456789, RxPackets: 987654, RxErrs: 3, RxDrop: 4, RxFifo: 5, RxFrame: 6,
				TxBytes: 4294967296, TxPackets: 765432, TxErrs: 7, TxDrop: 8, TxFifo: 9, TxColls: 10, TxCarrier: 11,
			},
			{Name: "veth-a.b_c", RxBytes: 1, RxPackets: 2, TxBytes: 3, TxPackets: 4},
		},
	}, {
		// The eth0 line is cut.
		dir: "truncated",
		want: []kernel.Interface{
			{Name: "lo", RxBytes: 3193, RxPackets: 29, TxBytes: 3193, TxPackets: 29},
			{Name: "ifb0"},
			{Name: "ifb1"},
		},
		wantParse: true,
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := fixture(tt.dir).Dev()
			checkErr(t, "Dev()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Dev() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseDev(t *testing.T) {
	const header = "Inter-|   Receive                                                |  Transmit\n" +
		" face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n"
	tests := []struct {
		name      string
		in        string
		want      []kernel.Interface
		wantParse bool
	}{
		{"header only", header, []kernel.Interface{}, false},
		{"no header", "  lo: 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16\n", []kernel.Interface{{
			Name: "lo", RxBytes: 1, RxPackets: 2, RxErrs: 3, RxDrop: 4, RxFifo: 5, RxFrame: 6,
			TxBytes: 9, TxPackets: 10, TxErrs: 11, TxDrop: 12, TxFifo: 13, TxColls: 14, TxCarrier: 15,
		}}, false},
		{"too few columns", header + "  a: 1 2 3\n  b: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", []kernel.Interface{{Name: "b"}}, true},
		{"too many columns", header + "  a: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", []kernel.Interface{}, true},
		{"bad number", header + "  a: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 x\n", []kernel.Interface{}, true},
		{"no name", header + "   : 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", []kernel.Interface{}, true},
		{"space in name", header + " a b: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", []kernel.Interface{}, true},
		{"no colon", header + "  a 0 0\n", []kernel.Interface{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseDev([]byte(tt.in))
			checkErr(t, "parseDev()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseDev() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
