package procnet

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// addSeeds adds the fixture files named to f's corpus.
func addSeeds(f *testing.F, names ...string) {
	f.Helper()
	for _, name := range names {
		f.Add(readFixture(f, name))
	}
}

// lineCount returns the most entries a line-based parser may return for b.
func lineCount(b []byte) int {
	return bytes.Count(b, []byte{'\n'}) + 1
}

// checkFuzzErr fails t if err is neither nil nor an ErrParse.
func checkFuzzErr(t *testing.T, err error) {
	t.Helper()
	if err != nil && !errors.Is(err, ErrParse) {
		t.Fatalf("error = %v, want nil or wrapping ErrParse", err)
	}
}

func FuzzParseSoftnet(f *testing.F) {
	addSeeds(f, "host/net/softnet_stat", "old/v4.19/net/softnet_stat", "old/v5.10/net/softnet_stat", "truncated/net/softnet_stat")
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseSoftnet(b)
		checkFuzzErr(t, err)
		if len(got) > lineCount(b) {
			t.Fatalf("parseSoftnet() returned %d CPUs from %d lines", len(got), lineCount(b))
		}
		for _, s := range got {
			if s.CPU < 0 {
				t.Fatalf("parseSoftnet() returned CPU %d", s.CPU)
			}
			if s.Processed > 0xffffffff || s.BacklogLen > 0xffffffff {
				t.Fatalf("parseSoftnet() returned more than 32 bits: %+v", s)
			}
		}
	})
}

func FuzzParsePaired(f *testing.F) {
	addSeeds(f, "host/net/snmp", "host/net/netstat", "busy/net/netstat", "old/v4.19/net/netstat", "truncated/net/snmp", "truncated/net/netstat")
	f.Fuzz(func(t *testing.T, b []byte) {
		got := map[string]uint64{}
		err := parsePaired(b, "net/fuzz", got)
		checkFuzzErr(t, err)
		// Every counter needs a name in a header line and a value in the
		// next line, so there are fewer counters than fields.
		if n := len(bytes.Fields(b)); len(got) > n/2 {
			t.Fatalf("parsePaired() returned %d counters from %d fields", len(got), n)
		}
		for k := range got {
			group, name, ok := strings.Cut(k, ".")
			if !ok || group == "" || name == "" || strings.ContainsAny(k, " \t\n") {
				t.Fatalf("parsePaired() returned key %q", k)
			}
		}
	})
}

func FuzzParseDev(f *testing.F) {
	addSeeds(f, "host/net/dev", "busy/net/dev", "odd/net/dev", "truncated/net/dev")
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseDev(b)
		checkFuzzErr(t, err)
		if len(got) > lineCount(b) {
			t.Fatalf("parseDev() returned %d devices from %d lines", len(got), lineCount(b))
		}
		for _, d := range got {
			if d.Name == "" || strings.ContainsAny(d.Name, ": \t\n|") {
				t.Fatalf("parseDev() returned device name %q", d.Name)
			}
		}
	})
}

func FuzzParsePIDStat(f *testing.F) {
	addSeeds(f, "host/1234/stat", "odd/4321/stat", "truncated/1234/stat")
	f.Add([]byte("7 (a) b (c)) S 1 2 3 0 -1 4194560 10 0 0 0 17 4 0 0 20 0 1 0 22654\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parsePIDStat(b)
		checkFuzzErr(t, err)
		if got.Comm != "" && (len(got.Comm) >= len(b) || !bytes.Contains(b, []byte(got.Comm))) {
			t.Fatalf("parsePIDStat() returned comm %q not inside the input", got.Comm)
		}
		if got.PID < 0 {
			t.Fatalf("parsePIDStat() returned pid %d", got.PID)
		}
		if err == nil && (bytes.IndexByte(b, '(') < 0 || bytes.IndexByte(b, ')') < 0) {
			t.Fatal("parsePIDStat() error = nil for a stat without parentheses")
		}
	})
}
