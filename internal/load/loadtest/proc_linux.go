package loadtest

import (
	"os"
	"syscall"
)

// sysProcAttr puts nginx in a process group of its own, so that its master
// and workers can be signalled together, and asks for a fast shutdown of
// the master (SIGTERM) if the thread that started it dies, as it does when
// go test kills a test binary that timed out and cleanups never run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
}

// killGroup sends SIGKILL to the master's process group. Callers must
// call it before the master has been waited for, so that the group id
// cannot have been reused.
func killGroup(p *os.Process) error {
	return syscall.Kill(-p.Pid, syscall.SIGKILL)
}

// fileLimit is the worker_rlimit_nofile to ask for: 65536 as root, who may
// raise the hard limit, else the hard limit itself.
func fileLimit() uint64 {
	const want = 65536
	if os.Geteuid() == 0 {
		return want
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return min(rl.Max, want)
}
