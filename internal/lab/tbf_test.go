package lab

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseRate(t *testing.T) {
	for in, want := range map[string]uint64{
		"8mbit": 1_000_000, "8Mbit": 1_000_000, "1500kbit": 187_500, "1kibit": 128, "100mbps": 100_000_000,
		"1gbit": 125_000_000, "800": 100, "2.5mbit": 312_500, "40gbit": 5_000_000_000,
	} {
		if got, err := parseRate(in); err != nil || got != want {
			t.Errorf("parseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "mbit", "8furlongs", "-8mbit", "0mbit", "8 mbit"} {
		if got, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) = %d, want an error", in, got)
		}
	}
}

// TestNewTBF: the numbers tc 6.1 sent for the lab's token buckets, as
// `tc -s -d -raw qdisc` showed them on this kernel (tick_in_usec 15.625:
// /proc/net/psched "000003e8 00000040 000f4240 3b9aca00").
func TestNewTBF(t *testing.T) {
	const tick = 1000.0 / 64
	for _, tt := range []struct {
		rate string
		want tbf
	}{
		// rate 8Mbit burst 4Kb [0000fa00] lat 50ms limit 54096b
		{"8mbit", tbf{Rate: 1_000_000, Limit: 54096, Buffer: 0xfa00}},
		// rate 1500Kbit burst 4Kb [00053555] lat 50ms limit 13471b
		{"1500kbit", tbf{Rate: 187_500, Limit: 13471, Buffer: 0x53555}},
	} {
		rate, err := parseRate(tt.rate)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, newTBF(rate, tbfBurstBytes, tbfLatency, tick)); diff != "" {
			t.Errorf("newTBF(%s) mismatch (-want +got):\n%s", tt.rate, diff)
		}
	}
}
