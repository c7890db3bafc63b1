package procnet

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSockstat(t *testing.T) {
	tests := []struct {
		dir       string
		want      map[string]int64
		wantParse bool
	}{{
		dir: "host",
		want: map[string]int64{
			"sockets.used": 11,
			"TCP.inuse":    1, "TCP.orphan": 0, "TCP.tw": 7, "TCP.alloc": 25, "TCP.mem": 110,
			"UDP.inuse": 0, "UDP.mem": 0,
			"UDPLITE.inuse": 0,
			"RAW.inuse":     0,
			"FRAG.inuse":    0, "FRAG.memory": 0,
			"TCP6.inuse":     0,
			"UDP6.inuse":     0,
			"UDPLITE6.inuse": 0,
			"RAW6.inuse":     0,
			"FRAG6.inuse":    0, "FRAG6.memory": 0,
		},
	}, {
		dir: "busy",
		want: map[string]int64{
			"sockets.used": 26,
			"TCP.inuse":    24, "TCP.orphan": 0, "TCP.tw": 5, "TCP.alloc": 25, "TCP.mem": 110,
			"UDP.inuse": 2, "UDP.mem": 0,
			"UDPLITE.inuse": 0,
			"RAW.inuse":     0,
			"FRAG.inuse":    0, "FRAG.memory": 0,
			"TCP6.inuse":     0,
			"UDP6.inuse":     0,
			"UDPLITE6.inuse": 0,
			"RAW6.inuse":     0,
			"FRAG6.inuse":    0, "FRAG6.memory": 0,
		},
	}, {
		// The TCP line is cut and sockstat6 is missing.
		dir:       "truncated",
		want:      map[string]int64{"sockets.used": 11},
		wantParse: true,
	}}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			got, err := fixture(tt.dir).Sockstat()
			checkErr(t, "Sockstat()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Sockstat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSockstat(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		want      map[string]int64
		wantParse bool
	}{
		{"negative", "TCP: inuse 3 orphan -1\n", map[string]int64{"TCP.inuse": 3, "TCP.orphan": -1}, false},
		{"no value", "TCP: inuse 3 orphan\n", map[string]int64{"TCP.inuse": 3}, true},
		{"bad value", "TCP: inuse x orphan 2\n", map[string]int64{"TCP.orphan": 2}, true},
		{"no colon", "garbage\nUDP: inuse 1\n", map[string]int64{"UDP.inuse": 1}, true},
		{"truncated", "UDP: inuse 1\nTCP: inuse 3", map[string]int64{"UDP.inuse": 1}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := map[string]int64{}
			err := parseSockstat([]byte(tt.in), "net/sockstat", got)
			checkErr(t, "parseSockstat()", err, tt.wantParse)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("parseSockstat() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
