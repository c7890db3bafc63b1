package app

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// ProcState is one process's scheduling state at a sample, as the first
// field after comm in /proc/PID/stat has it: "R" running, "S" sleeping,
// "D" uninterruptible (with its wait channel), "T" stopped, "t" traced,
// "Z" zombie, "X" dead; "gone" when the process no longer exists.
type ProcState struct {
	PID   int    `json:"pid"`
	Comm  string `json:"comm,omitempty"`
	State string `json:"state"`
	Wchan string `json:"wchan,omitempty"`
}

// StateGone is the state of a process that exited.
const StateGone = "gone"

// Serves reports whether a process in this state takes connections off
// a socket: not one stopped, traced, a zombie, gone, or asleep where no
// signal reaches it.
func (p ProcState) Serves() bool {
	switch p.State {
	case "T", "t", "Z", "X", "x", StateGone:
		return false
	}
	return true
}

// Socket is one listening socket on a server's port at a sample and the
// processes that take connections off it. Every process may hold every
// socket (forked workers, inherited descriptors, SO_REUSEPORT groups
// nginx opens in its master); the one that waits on it has it in an
// epoll instance (/proc/PID/fdinfo of the epoll descriptor, "tfd: … ino:")
// or a thread blocked in accept on it.
type Socket struct {
	Addr  string `json:"addr"`
	Inode uint64 `json:"inode"`
	// Holders are the processes that have it open.
	Holders []int `json:"holders"`
	// Servers are the holders seen waiting on it; when none was seen (a
	// server that polls with poll() or select(), whose sets /proc does not
	// show, or a thread stopped between its calls), every holder.
	Servers []int `json:"servers"`
	// Seen says Servers were seen waiting on it, not assumed.
	Seen bool `json:"seen,omitempty"`
}

// maxServeFDs bounds the descriptors read per process for its epoll
// instances: a proxy with 16 000 connections costs a readlink each, and
// the listening sockets and the epoll instances are opened first.
const maxServeFDs = 4096

// sockets finds who serves each listener on port among ls and reads the
// state of every process holding one.
func sockets(proc string, ls []kernel.Listener, port int) ([]Socket, []ProcState) {
	var out []Socket
	holders := map[int]bool{}
	for _, l := range ls {
		if l.Proto == "unix" || l.Port != port || port == 0 {
			continue
		}
		out = append(out, Socket{Addr: l.Addr, Inode: l.Inode, Holders: slices.Clone(l.PIDs)})
		for _, pid := range l.PIDs {
			holders[pid] = true
		}
	}
	if len(out) == 0 {
		return nil, nil
	}
	pids := slices.Sorted(mapKeys(holders))
	waits := map[uint64][]int{}
	var states []ProcState
	for _, pid := range pids {
		st := procState(proc, pid)
		states = append(states, st)
		if st.State == StateGone {
			continue
		}
		for ino := range waitedOn(proc, pid) {
			waits[ino] = append(waits[ino], pid)
		}
	}
	for i := range out {
		s := &out[i]
		if w := waits[s.Inode]; len(w) > 0 {
			s.Servers, s.Seen = w, true
		} else {
			s.Servers = s.Holders
		}
	}
	return out, states
}

func mapKeys(m map[int]bool) func(func(int) bool) {
	return func(yield func(int) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// procState reads one process's state from /proc/PID/stat, and its wait
// channel when it is in uninterruptible sleep.
func procState(proc string, pid int) ProcState {
	p := strconv.Itoa(pid)
	st, err := procnet.Proc{FS: os.DirFS(proc)}.Stat(p)
	if err != nil || st.State == "" {
		return ProcState{PID: pid, State: StateGone}
	}
	ps := ProcState{PID: pid, Comm: st.Comm, State: st.State[:1]}
	if ps.State == "D" {
		w, _ := os.ReadFile(proc + "/" + p + "/wchan")
		ps.Wchan = strings.TrimSpace(string(w))
	}
	return ps
}

// waitedOn is the set of socket inodes process pid waits on: those its
// epoll instances watch, and those a thread of it is blocked in accept
// on.
func waitedOn(proc string, pid int) map[uint64]bool {
	out := map[uint64]bool{}
	p := proc + "/" + strconv.Itoa(pid)
	n := 0
	buf := make([]byte, 8192)
	listFDs(p+"/fd", 0, buf, func(fd int) bool {
		n++
		link, err := os.Readlink(p + "/fd/" + strconv.Itoa(fd))
		if err == nil && link == "anon_inode:[eventpoll]" {
			epollTargets(p+"/fdinfo/"+strconv.Itoa(fd), out)
		}
		return n < maxServeFDs
	})
	tasks, _ := os.ReadDir(p + "/task")
	for _, t := range tasks {
		nr, arg0, ok := blockedIn(p + "/task/" + t.Name())
		if !ok || !isAccept(nr) {
			continue
		}
		fd, err := strconv.ParseInt(strings.TrimPrefix(arg0, "0x"), 16, 32)
		if err != nil {
			continue
		}
		if ino, ok := socketInode(p + "/fd/" + strconv.FormatInt(fd, 10)); ok {
			out[ino] = true
		}
	}
	return out
}

// epollTargets adds the inodes an epoll instance watches, from its
// fdinfo: one "tfd: FD events: … ino:HEX sdev:…" line per watched
// descriptor (fs/eventpoll.c ep_show_fdinfo).
func epollTargets(path string, out map[uint64]bool) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	parseEpollFdinfo(bufio.NewScanner(f), out)
}

func parseEpollFdinfo(sc *bufio.Scanner, out map[uint64]bool) {
	sc.Buffer(make([]byte, 4096), 64<<10)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "tfd:") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if h, ok := strings.CutPrefix(f, "ino:"); ok {
				if ino, err := strconv.ParseUint(h, 16, 64); err == nil {
					out[ino] = true
				}
			}
		}
	}
}

// socketInode reads the inode of the socket a /proc/PID/fd link names
// ("socket:[12345]").
func socketInode(link string) (uint64, bool) {
	l, err := os.Readlink(link)
	if err != nil {
		return 0, false
	}
	s, ok := strings.CutPrefix(l, "socket:[")
	if !ok {
		return 0, false
	}
	ino, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64)
	return ino, err == nil
}
