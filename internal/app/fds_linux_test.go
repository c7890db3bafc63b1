package app

import (
	"os"
	"slices"
	"strconv"
	"testing"
)

// TestListFDs reads this process's /proc/PID/fd from a descriptor in
// the middle of 40 it opened: the kernel's directory positions follow
// descriptor numbers, so the listing starts there, in order, and a
// listing stopped by fn says it did not end.
func TestListFDs(t *testing.T) {
	var fds []int
	for range 40 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		fds = append(fds, int(f.Fd()))
	}
	dir := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd"
	buf := make([]byte, 512) // small: several getdents calls
	from := fds[20]
	var got []int
	end, err := listFDs(dir, from, buf, func(fd int) bool { got = append(got, fd); return true })
	if err != nil || !end {
		t.Fatalf("listFDs: end %v, %v", end, err)
	}
	if !slices.IsSorted(got) || len(got) == 0 || got[0] != from {
		t.Fatalf("from %d: listed %v", from, got)
	}
	for _, fd := range fds[20:] {
		if !slices.Contains(got, fd) {
			t.Errorf("descriptor %d not listed from %d: %v", fd, from, got)
		}
	}
	var all []int
	if _, err := listFDs(dir, 0, buf, func(fd int) bool { all = append(all, fd); return true }); err != nil || !slices.Contains(all, 0) || !slices.Contains(all, fds[0]) {
		t.Errorf("from 0: listed %v, %v", all, err)
	}
	n := 0
	if end, err := listFDs(dir, 0, buf, func(int) bool { n++; return n < 5 }); end || err != nil || n != 5 {
		t.Errorf("stopped listing: end %v after %d, %v", end, n, err)
	}
	if _, err := listFDs("/proc/0/fd", 0, buf, func(int) bool { return true }); err == nil {
		t.Errorf("no error for a process that does not exist")
	}
}
