package journal

import (
	"fmt"
	"testing"
	"testing/fstest"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// stat is a /proc/PID/stat line for pid started at start (field 22).
func stat(pid int, start uint64) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(fmt.Sprintf("%d (netdoctor) S 1 %d %d 0 -1 4194560 104 0 0 0 7 3 0 0 20 0 9 0 %d 2998272 411 18446744073709551615 0\n",
		pid, pid, pid, start))}
}

func TestOwnerAlive(t *testing.T) {
	p := procnet.Proc{FS: fstest.MapFS{"4242/stat": stat(4242, 188461)}}
	for _, tt := range []struct {
		what  string
		owner Owner
		want  bool
	}{
		{"running", Owner{PID: 4242, Start: 188461}, true},
		{"gone", Owner{PID: 4243, Start: 188461}, false},
		{"PID reused by a later process", Owner{PID: 4242, Start: 188000}, false},
		{"start unknown: by PID", Owner{PID: 4242}, true},
		{"start unknown, gone", Owner{PID: 4243}, false},
		{"no PID", Owner{}, false},
	} {
		if got := tt.owner.aliveIn(p); got != tt.want {
			t.Errorf("%s: %+v.Alive() = %v, want %v", tt.what, tt.owner, got, tt.want)
		}
	}
}
