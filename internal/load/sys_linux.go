package load

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fdReserve is the number of descriptors kept for everything but
// connections: epoll, stdio, the Go runtime, files.
const fdReserve = 64

// raiseNofile lifts RLIMIT_NOFILE to its hard limit and returns how many
// connections fit under it, with a note when conns do not.
func raiseNofile(conns int) (int, string) {
	var r unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &r); err != nil {
		return conns, ""
	}
	if r.Cur < r.Max {
		r.Cur = r.Max
		_ = unix.Setrlimit(unix.RLIMIT_NOFILE, &r)
		_ = unix.Getrlimit(unix.RLIMIT_NOFILE, &r)
	}
	fit := int(r.Cur) - fdReserve
	if conns <= fit {
		return conns, ""
	}
	return max(fit, 1), fmt.Sprintf("-c %d exceeds the open-file limit (RLIMIT_NOFILE %d, hard %d): running %d connections; raise the hard limit (ulimit -Hn, LimitNOFILE=) to open more",
		conns, r.Cur, r.Max, max(fit, 1))
}

// processCPU returns the user+system CPU seconds of this process.
func processCPU() float64 {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// threadCPU returns the CPU time of the calling OS thread, in seconds.
func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}
