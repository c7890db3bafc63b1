package journal

import (
	"os"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// Owner is the process that keeps a journal: its PID and its start time
// (/proc/PID/stat's starttime, clock ticks after boot), which together
// name one process even after the PID has been given to another.
type Owner struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start_time"`
}

// procfs is the host's /proc: journals are written and read in the
// host's PID namespace.
var procfs = procnet.Proc{FS: os.DirFS("/proc")}

// Self is the calling process as an owner.
func Self() Owner { return selfIn(procfs) }

func selfIn(p procnet.Proc) Owner {
	o := Owner{PID: os.Getpid()}
	if st, err := p.Stat(strconv.Itoa(o.PID)); err == nil {
		o.Start = st.StartTime
	}
	return o
}

// Alive reports whether the owner still runs: a process has its PID and
// started when it did. An owner whose start time is unknown (0) is judged
// by its PID alone.
func (o Owner) Alive() bool { return o.aliveIn(procfs) }

func (o Owner) aliveIn(p procnet.Proc) bool {
	if o.PID <= 0 {
		return false
	}
	st, err := p.Stat(strconv.Itoa(o.PID))
	return err == nil && (o.Start == 0 || st.StartTime == o.Start)
}
