package procnet

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

func TestCPU(t *testing.T) {
	tests := []struct {
		dir       string
		want      []kernel.CPU
		wantParse bool
	}{{
		dir: "host",
		want: []kernel.CPU{
			{CPU: -1, User: 1520, System: 1228, Idle: 42522, IOWait: 108, SoftIRQ: 17, Steal: 10},
			{CPU: 0, User: 655, System: 527, Idle: 21493, IOWait: 7, SoftIRQ: 5, Steal: 3},
			{CPU: 1, User: 864, System: 701, Idle: 21028, IOWait: 100, SoftIRQ: 11, Steal: 6},
		},
	}, {
		dir: "old/v2.6.18",
		want: []kernel.CPU{
			{CPU: -1, User: 79612, Nice: 183, System: 27034, Idle: 3619034, IOWait: 12847, IRQ: 221, SoftIRQ: 1830},
			{CPU: 0, User: 40102, Nice: 90, System: 13722, Idle: 1808466, IOWait: 6723, IRQ: 221, SoftIRQ: 1203},
			{CPU: 1, User: 39510, Nice: 93, System: 13312, Idle: 1810568, IOWait: 6124, SoftIRQ: 627},
		},
	}, {
		// The cpu1 line is cut.
		dir: "truncated",
		want: []kernel.CPU{
			{CPU: -1, User: 1520, System: 1228, Idle: 42522, IOWait: 108, SoftIRQ: 17, Steal: 10},
			{CPU: 0, User: 655, System: 527, Idle: 21493, IOWait: 7, SoftIRQ: 5, Steal: 3},
		},
		wantParse: true,
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := fixture(tt.dir).CPU()
			checkErr(t, "CPU()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("CPU() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      []kernel.CPU
		wantParse bool
	}{
		{"4 columns (2.4)", "cpu 1 2 3 4\ncpu0 1 2 3 4\npage 5 6\n", []kernel.CPU{
			{CPU: -1, User: 1, Nice: 2, System: 3, Idle: 4},
			{CPU: 0, User: 1, Nice: 2, System: 3, Idle: 4},
		}, false},
		{"7 columns (2.6.0)", "cpu 1 2 3 4 5 6 7\n", []kernel.CPU{
			{CPU: -1, User: 1, Nice: 2, System: 3, Idle: 4, IOWait: 5, IRQ: 6, SoftIRQ: 7},
		}, false},
		{"guest columns ignored", "cpu 1 2 3 4 5 6 7 8 9 10\n", []kernel.CPU{
			{CPU: -1, User: 1, Nice: 2, System: 3, Idle: 4, IOWait: 5, IRQ: 6, SoftIRQ: 7, Steal: 8},
		}, false},
		{"stops after the cpu lines", "cpu 1 2 3 4\nintr 1 2\ncpu9 x\n", []kernel.CPU{
			{CPU: -1, User: 1, Nice: 2, System: 3, Idle: 4},
		}, false},
		{"tail cut after the cpu lines", "cpu 1 2 3 4\nintr 1 2", []kernel.CPU{
			{CPU: -1, User: 1, Nice: 2, System: 3, Idle: 4},
		}, false},
		{"too few columns", "cpu 1 2 3\ncpu0 1 2 3 4\n", []kernel.CPU{{CPU: 0, User: 1, Nice: 2, System: 3, Idle: 4}}, true},
		{"bad cpu number", "cpu 1 2 3 4\ncpux 1 2 3 4\n", []kernel.CPU{{CPU: -1, User: 1, Nice: 2, System: 3, Idle: 4}}, true},
		{"bad number", "cpu 1 2 x 4\n", nil, true},
		{"no cpu lines", "intr 1\n", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat([]byte(tt.in))
			checkErr(t, "parseStat()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseStat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
