package collect

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// maxProcesses bounds the processes read per snapshot; a pre-forked
// server with hundreds of workers would otherwise dominate the cost.
const maxProcesses = 64

// processes reads the owners of every listener plus the named PIDs.
func processes(p procnet.Proc, s *evidence.Snapshot, extra []int) error {
	roles := map[int]string{}
	var pids []int
	add := func(pid int, role string) {
		if _, ok := roles[pid]; !ok {
			pids = append(pids, pid)
			roles[pid] = role
		}
	}
	for _, pid := range extra {
		add(pid, "requested")
	}
	if s.Sockets != nil {
		for _, l := range s.Sockets.Listeners {
			for _, pid := range l.PIDs {
				add(pid, "listener "+l.Addr)
			}
		}
	}
	slices.Sort(pids)
	if len(pids) > maxProcesses {
		pids = pids[:maxProcesses]
	}
	var errs []error
	for _, pid := range pids {
		pr, err := p.Process(pid)
		if err != nil && pr.PID == 0 {
			errs = append(errs, fmt.Errorf("pid %d: %w", pid, err))
			continue
		}
		pr.PID = pid
		pr.Role = roles[pid]
		s.Processes = append(s.Processes, pr)
	}
	if err := errors.Join(errs...); err != nil {
		if len(s.Processes) > 0 {
			return partial{err}
		}
		return err
	}
	return nil
}

// comm returns a process's command name, or "" if it is gone.
func comm(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
