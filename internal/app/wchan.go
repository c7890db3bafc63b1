package app

import (
	"os"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// Wait classes: what a worker thread was doing when sampled. A blocking
// worker (php-fpm, a thread pool) shows in its wait channel where its
// request time goes, without a profiler: in a sleep, on a lock, on a
// backend's socket. An event-driven server (nginx) always waits in epoll,
// so for it only "running" versus "idle" means something.
const (
	WaitRunning = "running"   // on CPU or runnable (state R)
	WaitIdle    = "idle"      // waiting for a new connection or event
	WaitLock    = "lock"      // futex: a mutex or condition variable
	WaitFile    = "file-lock" // flock/fcntl lock: e.g. a shared log file
	WaitSleep   = "sleep"     // nanosleep: sleep()/usleep() in the code
	WaitNetwork = "network"   // reading from or connecting to a peer
	WaitDNS     = "dns"       // polling the socket of a name lookup (glibc's resolver)
	WaitDisk    = "disk"      // uninterruptible sleep (state D): I/O
	WaitOther   = "other"     // any other kernel function
)

// wchanClass maps the kernel functions a sleeping thread is seen in
// (/proc/PID/task/TID/wchan, 6.x names) to a wait class.
var wchanClass = map[string]string{
	"do_epoll_wait": WaitIdle, "ep_poll": WaitIdle, "poll_schedule_timeout.constprop.0": WaitIdle,
	"poll_schedule_timeout": WaitIdle, "do_select": WaitIdle, "do_sys_poll": WaitIdle,
	"inet_csk_accept": WaitIdle, "inet_csk_wait_for_connect": WaitIdle, "unix_accept": WaitIdle,
	"do_sigtimedwait": WaitIdle, "sigsuspend": WaitIdle, "do_wait": WaitIdle, "kernel_wait4": WaitIdle,
	"futex_wait_queue": WaitLock, "futex_wait_queue_me": WaitLock, "futex_wait": WaitLock, "futex_do_wait": WaitLock, // 6.16+
	"locks_lock_inode_wait": WaitFile, "flock_lock_inode_wait": WaitFile, "posix_lock_inode_wait": WaitFile,
	"__flock_lock_inode_wait": WaitFile, "locks_lock_file_wait": WaitFile,
	"hrtimer_nanosleep": WaitSleep, "do_nanosleep": WaitSleep, "common_nsleep": WaitSleep,
	"sk_wait_data": WaitNetwork, "wait_woken": WaitNetwork, "unix_stream_read_generic": WaitNetwork,
	"unix_stream_data_wait": WaitNetwork, "inet_wait_for_connect": WaitNetwork, "sk_stream_wait_memory": WaitNetwork,
	"__skb_wait_for_more_packets": WaitNetwork, "tcp_recvmsg_locked": WaitNetwork,
}

// Waits counts the threads of pids by wait class, and by the raw kernel
// function for threads in WaitOther. Processes that vanished are skipped.
// A thread reading from a connection accepted on servePort (> 0) waits
// for its client's next request, not on a backend: it counts as idle. A
// php-fpm worker holding nginx's kept-alive FastCGI connection sits there
// between requests, with the same wait channel as one waiting on MySQL.
func Waits(proc string, pids []int, servePort int) (classes map[string]int, other map[string]int) {
	classes = map[string]int{}
	fsys := procnet.Proc{FS: os.DirFS(proc)}
	for _, pid := range pids {
		task := strconv.Itoa(pid) + "/task"
		dir := proc + "/" + task
		tids, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, t := range tids {
			st, err := fsys.Stat(task + "/" + t.Name())
			if err != nil || st.State == "" {
				continue
			}
			w, _ := os.ReadFile(dir + "/" + t.Name() + "/wchan")
			state, wchan := st.State[0], strings.TrimSpace(string(w))
			c := classify(state, wchan)
			if c == WaitNetwork && servePort > 0 && readsFrom(dir+"/"+t.Name(), pid) == servePort {
				c = WaitIdle
			}
			if c == WaitIdle && pollWchan[wchan] && polls(dir+"/"+t.Name()) && resolving(proc, pid) {
				c = WaitDNS
			}
			classes[c]++
			if c == WaitOther {
				if other == nil {
					other = map[string]int{}
				}
				other[wchan]++
			}
		}
	}
	return classes, other
}

// pollWchan are where poll(2)/ppoll(2) sleep: glibc's resolver waits
// for the nameserver's answer there.
var pollWchan = map[string]bool{"do_sys_poll": true, "poll_schedule_timeout": true, "poll_schedule_timeout.constprop.0": true}

// polls reports whether a blocked thread is in poll or ppoll.
func polls(taskDir string) bool {
	nr, _, ok := blockedIn(taskDir)
	return ok && isPoll(nr)
}

// blockedIn returns the system call a blocked thread is in and its
// first argument, from /proc/PID/task/TID/syscall ("0 0x5 ..." is
// read(5, ...)); ok is false for a running thread or one in no call.
func blockedIn(taskDir string) (nr int, arg0 string, ok bool) {
	b, err := os.ReadFile(taskDir + "/syscall")
	if err != nil {
		return 0, "", false
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, "", false // "running", or no syscall
	}
	nr, err = strconv.Atoi(f[0])
	return nr, f[1], err == nil
}

// resolving reports whether process pid holds a socket connected to port
// 53: glibc's res_send connects a UDP one to the nameserver (TCP when
// the answer is truncated or `options use-vc`), sends the query and
// polls it. A worker polling while it holds one waits for a name lookup
// (seed 001 §4–5), which the wait channel alone calls idle.
func resolving(proc string, pid int) bool {
	dir := proc + "/" + strconv.Itoa(pid) + "/fd"
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range fds {
		l, err := os.Readlink(dir + "/" + e.Name())
		if err != nil || !strings.HasPrefix(l, "socket:") {
			continue
		}
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if port, _, ok := peerPort(pid, fd); ok && port == 53 {
			return true
		}
	}
	return false
}

func classify(state byte, wchan string) string {
	switch state {
	case 'R':
		return WaitRunning
	case 'D':
		if c := wchanClass[wchan]; c == WaitFile || c == WaitLock {
			return c
		}
		return WaitDisk
	}
	if c, ok := wchanClass[wchan]; ok {
		return c
	}
	if wchan == "" || wchan == "0" {
		return WaitOther
	}
	return WaitOther
}

// readsFrom returns the local port of the socket a blocked thread reads
// from, or 0.
func readsFrom(taskDir string, pid int) int {
	nr, arg0, ok := blockedIn(taskDir)
	if !ok || !isRead(nr) {
		return 0
	}
	fd, err := strconv.ParseInt(strings.TrimPrefix(arg0, "0x"), 16, 32)
	if err != nil {
		return 0
	}
	port, _ := localPort(pid, int(fd))
	return port
}
