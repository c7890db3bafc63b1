package procnet

import (
	"errors"
	"io/fs"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestConntrackStat(t *testing.T) {
	v419 := map[string]uint64{
		"entries": 0x2a, "searched": 0x1800, "found": 0x300, "new": 0x40, "invalid": 5,
		"ignore": 0x150, "delete": 0x30, "delete_list": 0x30, "insert": 0x40,
		"insert_failed": 1, "drop": 3, "early_drop": 0, "icmp_error": 3,
		"expect_new": 0, "expect_create": 0, "expect_delete": 0, "search_restart": 8,
	}
	tests := []struct {
		dir       string
		want      map[string]uint64
		wantParse bool
	}{{
		// 6.18's header, an idle table.
		dir: "host",
		want: map[string]uint64{
			"entries": 0, "clashres": 0, "found": 0, "new": 0, "invalid": 0,
			"ignore": 0, "delete": 0, "chainlength": 0, "insert": 0,
			"insert_failed": 0, "drop": 0, "early_drop": 0, "icmp_error": 0,
			"expect_new": 0, "expect_create": 0, "expect_delete": 0, "search_restart": 0,
		},
	}, {
		dir:  "old/v4.19",
		want: v419,
	}, {
		// The second CPU line is cut: the first one's values only.
		dir: "truncated",
		want: map[string]uint64{
			"entries": 0x2a, "searched": 0x1000, "found": 0x200, "new": 0x30, "invalid": 4,
			"ignore": 0x100, "delete": 0x20, "delete_list": 0x20, "insert": 0x30,
			"insert_failed": 1, "drop": 2, "early_drop": 0, "icmp_error": 3,
			"expect_new": 0, "expect_create": 0, "expect_delete": 0, "search_restart": 7,
		},
		wantParse: true,
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := fixture(tt.dir).ConntrackStat()
			checkErr(t, "ConntrackStat()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ConntrackStat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConntrackStatMissing(t *testing.T) {
	_, err := fixture("odd").ConntrackStat()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ConntrackStat() error = %v, want fs.ErrNotExist", err)
	}
}

func TestParseConntrackStat(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      map[string]uint64
		wantParse bool
	}{
		{"empty", "", nil, true},
		{"header only", "entries drop\n", map[string]uint64{"entries": 0, "drop": 0}, false},
		{"entries not summed", "entries drop\n00000005 00000001\n00000005 00000002\n",
			map[string]uint64{"entries": 5, "drop": 3}, false},
		{"no header", "00000005 00000001\n00000005 00000002\n", nil, true},
		{"short line", "entries drop\n00000005\n00000005 00000002\n",
			map[string]uint64{"entries": 5, "drop": 2}, true},
		{"not hex", "entries drop\n00000005 0000000x\n00000005 00000002\n",
			map[string]uint64{"entries": 5, "drop": 2}, true},
		{"truncated header", "entries dr", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConntrackStat([]byte(tt.in))
			checkErr(t, "parseConntrackStat()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseConntrackStat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
