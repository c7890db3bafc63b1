package app

import (
	"time"

	"golang.org/x/sys/unix"
)

// affinity lists the CPUs process pid may run on (sched_getaffinity),
// nil when it cannot be read.
func affinity(pid int) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(pid, &set); err != nil {
		return nil
	}
	var out []int
	for i := 0; i < len(set)*64; i++ {
		if set.IsSet(i) {
			out = append(out, i)
		}
	}
	return out
}

// uptimeAt is the time since boot at now (CLOCK_BOOTTIME, the clock of
// PID/stat's starttime), 0 when it cannot be read.
func uptimeAt(now time.Time) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano()) - time.Since(now)
}
