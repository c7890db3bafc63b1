package procnet

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

func TestSoftnet(t *testing.T) {
	tests := []struct {
		dir       string
		want      []kernel.Softnet
		wantParse bool
	}{{
		// 6.18, 15 columns: the CPU index is column 12.
		dir: "host",
		want: []kernel.Softnet{
			{CPU: 0, Processed: 0x61},
			{CPU: 1, Processed: 0x3a3},
		},
	}, {
		// 11 columns: no CPU index, no backlog length.
		dir: "old/v4.19",
		want: []kernel.Softnet{
			{CPU: 0, Processed: 0x1e2f1, TimeSqueeze: 3},
			{CPU: 1, Processed: 0xa1b2c3, Dropped: 0x2a, TimeSqueeze: 0x101, ReceivedRPS: 0x10, FlowLimitCount: 5},
			{CPU: 2, Processed: 0x400},
			{CPU: 3, Processed: 0xffffffff, Dropped: 1, TimeSqueeze: 2, ReceivedRPS: 3, FlowLimitCount: 4},
		},
	}, {
		// 13 columns, CPU 1 offline: the second line is CPU 2.
		dir: "old/v5.10",
		want: []kernel.Softnet{
			{CPU: 0, Processed: 0x35e1a, TimeSqueeze: 7},
			{CPU: 2, Processed: 0x2b3c4, Dropped: 0xc35, TimeSqueeze: 0x19, ReceivedRPS: 0xb, FlowLimitCount: 2, BacklogLen: 3},
		},
	}, {
		// The second line is cut after 13 columns and a half.
		dir:       "truncated",
		want:      []kernel.Softnet{{CPU: 0, Processed: 0x61}},
		wantParse: true,
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := fixture(tt.dir).Softnet()
			checkErr(t, "Softnet()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Softnet() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// softnetLine returns a softnet_stat line of n columns, column i holding
// i+1, and the CPU column (12) holding cpu when there is one.
func softnetLine(n, cpu int) string {
	cols := make([]string, n)
	for i := range cols {
		cols[i] = strings.Repeat("0", 6) + string("0123456789abcdef"[(i+1)/16]) + string("0123456789abcdef"[(i+1)%16])
	}
	if n > 12 {
		cols[12] = "0000000" + string("0123456789abcdef"[cpu])
	}
	return strings.Join(cols, " ") + "\n"
}

func TestParseSoftnet(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      []kernel.Softnet
		wantParse bool
	}{
		{"empty", "", nil, false},
		{"10 columns", softnetLine(10, 0) + softnetLine(10, 0), []kernel.Softnet{
			{CPU: 0, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10},
			{CPU: 1, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10},
		}, false},
		{"15 columns", softnetLine(15, 5), []kernel.Softnet{
			{CPU: 5, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10, FlowLimitCount: 11, BacklogLen: 12},
		}, false},
		{"a later kernel's 18 columns", softnetLine(18, 7), []kernel.Softnet{
			{CPU: 7, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10, FlowLimitCount: 11, BacklogLen: 12},
		}, false},
		{"too few columns", softnetLine(9, 0), nil, true},
		{"columns change", softnetLine(13, 0) + softnetLine(11, 0) + softnetLine(13, 1), []kernel.Softnet{
			{CPU: 0, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10, FlowLimitCount: 11, BacklogLen: 12},
			{CPU: 1, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10, FlowLimitCount: 11, BacklogLen: 12},
		}, true},
		{"not hex", strings.Replace(softnetLine(11, 0), "00000001", "0000000g", 1), nil, true},
		{"more than 32 bits", strings.Replace(softnetLine(11, 0), "00000001", "100000000", 1), nil, true},
		{"truncated", softnetLine(11, 0) + softnetLine(11, 0)[:50], []kernel.Softnet{
			{CPU: 0, Processed: 1, Dropped: 2, TimeSqueeze: 3, ReceivedRPS: 10, FlowLimitCount: 11},
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseSoftnet([]byte(tt.in))
			checkErr(t, "parseSoftnet()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseSoftnet() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
