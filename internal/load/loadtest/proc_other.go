//go:build !linux

package loadtest

import (
	"os"
	"syscall"
)

// sysProcAttr is nil: process groups and parent-death signals are only
// used on Linux, where the tests that need nginx run.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup kills the master only: its workers may outlive it.
func killGroup(p *os.Process) error { return p.Kill() }

// fileLimit is 0: leave worker_rlimit_nofile out.
func fileLimit() uint64 { return 0 }
