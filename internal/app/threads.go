package app

import (
	"os"
	"strconv"
	"strings"

	"github.com/netdoctor/netdoctor/internal/procnet"
)

// Thread is one thread of a server's processes at one sample, kept for
// the pools found from their threads: threads that take turns at the
// same work share a name but for a number (a JVM executor's
// "pool-1-thread-3", Tomcat's "http-nio-8080-exec-12"), and each idles
// in a wait of its own (its condition variable, its queue's) that a
// sample outside the load shows.
type Thread struct {
	TID  int    `json:"tid"`
	Name string `json:"name"`
	// Class is the wait class (WaitRunning, WaitSleep…).
	Class string `json:"class"`
	// Wait is what a blocked thread is in: the system call and its first
	// argument ("futex 0x7eff50007778", "read 12"), with " timed" for a
	// futex wait with a timeout (Thread.sleep, a timed park), or its wait
	// channel when the call is not known; "" while it runs.
	Wait string `json:"wait,omitempty"`
	// Peer is the remote address of the connection a thread reads from.
	Peer string `json:"peer,omitempty"`
}

// Family is a thread name without its trailing number: the name a
// runtime or a pool gives all its threads ("pool-1-thread-3" →
// "pool-1-thread-", "GC Thread#1" → "GC Thread#").
func Family(name string) string {
	return strings.TrimRight(name, "0123456789")
}

// runtimeThreads are the names (or prefixes) of threads a runtime runs
// for itself, never a request: the JVM's collectors, compilers and
// housekeeping, its HTTP server's dispatcher and timers; Node's V8
// platform workers. Busy or not, they are no pool of the server's.
var runtimeThreads = []string{
	"GC Thread#", "G1 ", "VM Thread", "VM Periodic Tas", "C1 CompilerThre", "C2 CompilerThre",
	"Reference Handl", "Finalizer", "Signal Dispatch", "Service Thread", "Monitor Deflati",
	"Sweeper thread", "Common-Cleaner", "Notification Th", "Attach Listener", "process reaper",
	"JFR ", "ZWorker", "ZDirector", "ZStat", "Shenandoah", "Keep-Alive-Time", "idle-timeout-ta",
	"HTTP-Dispatcher", "V8 DefaultWorke", "V8 PlatformWork",
}

// RuntimeThread reports whether a thread name is one a runtime gives
// its own threads (runtimeThreads).
func RuntimeThread(name string) bool {
	for _, p := range runtimeThreads {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// threadSamples reads the threads of pids that carry a name of their
// own (not their process's: the runtime or the application named them,
// and not as a runtime names its helpers), what each waits on, and, for
// one reading from a connection, its peer. Threads named after their
// process (Go's, Python's, Node's) are left to the wait classes.
func threadSamples(proc string, pids []int, servePort int) []Thread {
	var out []Thread
	fsys := procnet.Proc{FS: os.DirFS(proc)}
	for _, pid := range pids {
		p := strconv.Itoa(pid)
		comm, err := os.ReadFile(proc + "/" + p + "/comm")
		if err != nil {
			continue
		}
		own := strings.TrimSpace(string(comm))
		dir := proc + "/" + p + "/task"
		tids, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, t := range tids {
			tdir := dir + "/" + t.Name()
			b, err := os.ReadFile(tdir + "/comm")
			if err != nil {
				continue
			}
			name := strings.TrimSpace(string(b))
			if name == own || RuntimeThread(name) {
				continue
			}
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			st, err := fsys.Stat(p + "/task/" + t.Name())
			if err != nil || st.State == "" {
				continue
			}
			w, _ := os.ReadFile(tdir + "/wchan")
			wchan := strings.TrimSpace(string(w))
			th := Thread{TID: tid, Name: name, Class: classify(st.State[0], wchan)}
			if th.Class != WaitRunning {
				th.Wait = waitOf(tdir, pid, wchan)
				if th.Class == WaitNetwork {
					th.Peer = readPeer(tdir, pid, servePort)
					if th.Peer == "" && servePort > 0 && readsFrom(tdir, pid) == servePort {
						th.Class = WaitIdle // its client's next request
					}
				}
			}
			out = append(out, th)
		}
	}
	return out
}

// waitOf is what a blocked thread is in: its system call and first
// argument from /proc/PID/task/TID/syscall, " timed" added to a futex
// wait with a timeout; its wait channel when the call is not readable.
func waitOf(taskDir string, pid int, wchan string) string {
	b, err := os.ReadFile(taskDir + "/syscall")
	if err != nil {
		return wchan
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return wchan
	}
	nr, err := strconv.Atoi(f[0])
	if err != nil {
		return wchan
	}
	name := syscallName(nr)
	w := name + " " + f[1]
	if name == "futex" && len(f) > 4 && f[4] != "0x0" {
		w += " timed"
	}
	return w
}

// readPeer is the remote address of the connection a thread blocked in
// a read reads from, "" when it reads no inet socket (or its server's
// own client, on servePort).
func readPeer(taskDir string, pid, servePort int) string {
	nr, arg0, ok := blockedIn(taskDir)
	if !ok || !isRead(nr) {
		return ""
	}
	fd, err := strconv.ParseInt(strings.TrimPrefix(arg0, "0x"), 16, 32)
	if err != nil {
		return ""
	}
	if port, _ := localPort(pid, int(fd)); servePort > 0 && port == servePort {
		return ""
	}
	return peerAddr(pid, int(fd))
}

// SameWait reports whether a thread's wait w is the wait idle, which it
// was seen in while idle: the same call on the same first argument; for
// a futex, on the same condition variable (glibc's pthread_cond_t
// alternates its waiters between two futex words of one 48-byte struct)
// and as timed or not.
func SameWait(w, idle string) bool {
	if w == idle {
		return true
	}
	wc, wa, _ := strings.Cut(w, " ")
	ic, ia, _ := strings.Cut(idle, " ")
	if wc != "futex" || ic != "futex" || strings.HasSuffix(wa, " timed") != strings.HasSuffix(ia, " timed") {
		return false
	}
	a, err1 := strconv.ParseUint(strings.TrimPrefix(strings.TrimSuffix(wa, " timed"), "0x"), 16, 64)
	b, err2 := strconv.ParseUint(strings.TrimPrefix(strings.TrimSuffix(ia, " timed"), "0x"), 16, 64)
	return err1 == nil && err2 == nil && max(a, b)-min(a, b) < 48
}
