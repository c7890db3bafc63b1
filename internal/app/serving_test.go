package app

import (
	"bufio"
	"os"
	"testing"
)

// The fixture is the fdinfo of a real epoll instance (kernel 6.18)
// watching a listening socket (inode 57078306) and a pipe; the epoll's
// own "ino:" line is not a target.
func TestParseEpollFdinfo(t *testing.T) {
	for _, c := range []struct {
		file string
		want []uint64
	}{
		{"testdata/epoll/fdinfo", []uint64{57078306, 57078307}},
		{"testdata/epoll/fdinfo.truncated", []uint64{57078306}},
	} {
		f, err := os.Open(c.file)
		if err != nil {
			t.Fatal(err)
		}
		got := map[uint64]bool{}
		parseEpollFdinfo(bufio.NewScanner(f), got)
		f.Close()
		if len(got) != len(c.want) {
			t.Errorf("%s: got %v, want %v", c.file, got, c.want)
		}
		for _, w := range c.want {
			if !got[w] {
				t.Errorf("%s: %d missing from %v", c.file, w, got)
			}
		}
		if got[0x1038] {
			t.Errorf("%s: the epoll's own inode taken for a target", c.file)
		}
	}
}

func TestProcStateServes(t *testing.T) {
	for st, want := range map[string]bool{"R": true, "S": true, "D": true, "T": false, "t": false, "Z": false, StateGone: false} {
		if got := (ProcState{State: st}).Serves(); got != want {
			t.Errorf("%s: Serves() = %v, want %v", st, got, want)
		}
	}
}
