package rules

import (
	"fmt"
	"slices"
	"strings"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// ListenerUnserved: a listening socket whose only servers were stopped, stuck or gone.
const ListenerUnserved report.FindingID = "listener-unserved"

var _ = define(Class{ID: ListenerUnserved,
	Critical: true,
	Errors:   true, Delays: true, Holds: true, Fails: FailsConnections,
	Consequences: []Consequence{{Effect: AcceptQueueFull, At: OwnListener}}, Blocks: true,
	Meaning:    "a listening socket's only server processes were stopped (`SIGSTOP`, a debugger), traced, zombies, gone or stuck in uninterruptible sleep for the whole load: the kernel still hashes new connections to it (a `SO_REUSEPORT` group), where they wait unaccepted",
	Active:     "in every sample of the load (at least 2), every process waiting on the socket (its epoll instances, a thread in accept; every holder when none is seen waiting) was in state T, t, Z, X, gone, or D (critical)",
	LatentWhen: "—",
	Seed:       "a stopped worker in a SO_REUSEPORT group",
	ReportedBy: "`run`",
	Doc: `Rule ´unserved´ (´unserved.go´). Each second of a run, for every listening socket on the
followed server's port (each socket of a ´SO_REUSEPORT´ group is one of its own), the processes that
hold it are read (the listener's owners), with their state from ´/proc/PID/stat´ (R, S, D with its wait
channel, T, t, Z) and which of them wait on it: the sockets each process's epoll instances watch (the
´tfd: … ino:´ lines of ´/proc/PID/fdinfo/FD´ of each ´anon_inode:[eventpoll]´ descriptor) and the socket
a thread blocked in ´accept´/´accept4´ waits on (´/proc/PID/task/TID/syscall´). Forked workers and
nginx's reuseport sockets are held by every worker, but each is polled by one; when no holder is seen
waiting (a server on ´poll()´ or ´select()´, whose sets /proc does not show), every holder counts as
its server (´sockets´ and ´procs´ in a sample's JSON).

**Active, critical** when in every sample of the load window (at least 2) every server of one socket
was stopped or traced (T, t), a zombie or dead (Z, X), gone, or in uninterruptible sleep (D). Title:
´python3 pid 4242 (stopped) is the only server of listening socket 10.0.0.1:8080 (inode 123456): its
connections wait unaccepted´; evidence: each server's states over the window, the socket's accept queue
and drops at the end of the window, and the port's other sockets and their servers. The fix: continue
(´kill -CONT PID´) or restart the process, or detach the debugger; a stuck (D) process waits on its
wait channel. Tested (TestPaired/RunStoppedReuseport) with two python3 processes, each with its own
´SO_REUSEPORT´ socket on one port, one stopped with ´SIGSTOP´: the process and its socket are named;
with none stopped, nothing. And (TestPaired/RunStoppedNginxWorker) with nginx's two workers on ´listen …
reuseport´, one stopped: every worker holds both sockets, the stopped one is named from its epoll
instance as the only server of its own.`,
})

var _ = register(Rule{Name: "unserved", Order: 185, Scope: PerRun, IDs: []report.FindingID{ListenerUnserved}, Checks: "who serves each listening socket", Check: checkUnserved,
	LooksIn: func(r *evidence.Run) bool {
		for _, s := range r.Servers {
			for _, smp := range s.Samples {
				if len(smp.Sockets) > 0 {
					return true
				}
			}
		}
		return false
	}})

// checkUnserved finds listening sockets that no live process served
// during the load: a stopped worker in a SO_REUSEPORT group keeps its
// share of the new connections, which wait in its queue.
func checkUnserved(in *Input) []report.Finding {
	r := in.Run
	if r == nil {
		return nil
	}
	var out []report.Finding
	b := serverBundle(r)
	done := map[uint64]bool{}
	for _, s := range r.Servers {
		var window []app.Sample
		for _, smp := range s.Samples {
			if !smp.Time.Before(r.LoadStart) && !smp.Time.After(r.LoadEnd) && len(smp.Sockets) > 0 {
				window = append(window, smp)
			}
		}
		if len(window) < 2 {
			continue
		}
		for _, sock := range window[0].Sockets {
			if done[sock.Inode] {
				continue
			}
			done[sock.Inode] = true
			if f, ok := unserved(r, s, b, window, sock.Inode); ok {
				out = append(out, f)
			}
		}
	}
	return out
}

// unserved judges one socket over the window's samples.
func unserved(r *evidence.Run, s *app.Server, b *evidence.Bundle, window []app.Sample, inode uint64) (report.Finding, bool) {
	seen := map[int][]string{} // each server's states, in order
	var servers []int
	var addr string
	for _, smp := range window {
		i := slices.IndexFunc(smp.Sockets, func(k app.Socket) bool { return k.Inode == inode })
		if i < 0 {
			return report.Finding{}, false
		}
		sock := smp.Sockets[i]
		addr = sock.Addr
		if len(sock.Servers) == 0 {
			return report.Finding{}, false
		}
		for _, pid := range sock.Servers {
			st := stateOf(smp.Procs, pid)
			if st.Serves() && st.State != "D" {
				return report.Finding{}, false
			}
			if !slices.Contains(servers, pid) {
				servers = append(servers, pid)
			}
			seen[pid] = append(seen[pid], describeState(st))
		}
	}
	comm := map[int]string{}
	for _, smp := range window {
		for _, p := range smp.Procs {
			if p.Comm != "" {
				comm[p.PID] = p.Comm
			}
		}
	}
	last := window[len(window)-1]
	var who []string
	var ev []report.Item
	for _, pid := range servers {
		name := comm[pid]
		if name == "" {
			name = s.Kind
		}
		st := stateOf(last.Procs, pid)
		who = append(who, fmt.Sprintf("%s pid %d (%s)", name, pid, stateWord(st)))
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s pid %d, sampled each second of the load: %s", name, pid, runOf(seen[pid])), Source: "process", Window: true})
	}
	if l, ok := listenerAt(b, inode); ok {
		ev = append(ev, report.Item{Text: fmt.Sprintf("listening socket %s (inode %d): accept queue %d of %d, %d dropped since it opened", l.Addr, inode, l.RecvQ, l.SendQ, l.Drops), Source: "sock_diag", Window: true})
	}
	for _, k := range last.Sockets {
		if k.Inode == inode {
			continue
		}
		var live []string
		for _, pid := range k.Servers {
			live = append(live, fmt.Sprintf("pid %d (%s)", pid, stateWord(stateOf(last.Procs, pid))))
		}
		ev = append(ev, report.Item{Text: fmt.Sprintf("the port's other socket %s (inode %d) is served by %s", k.Addr, k.Inode, strings.Join(live, ", ")), Source: "process", Window: true})
	}
	sock := window[0].Sockets[slices.IndexFunc(window[0].Sockets, func(k app.Socket) bool { return k.Inode == inode })]
	if !sock.Seen {
		ev = append(ev, report.Item{Text: "no holder of the socket was seen waiting on it (epoll, accept): its holders are taken for its servers", Source: "process", Window: true})
	}
	only := "is the only server"
	if len(who) > 1 {
		only = "are the only servers"
	}
	first := servers[0]
	return report.Finding{ID: ListenerUnserved, Severity: report.Critical, Status: report.Active,
		Subject: fmt.Sprintf("%s pid %d", comm[first], first),
		About:   report.About{Server: s.Kind, Listen: addr, PID: first}, Side: r.ServerSide(),
		Title:    fmt.Sprintf("%s %s of listening socket %s (inode %d): its connections wait unaccepted", strings.Join(who, ", "), only, addr, inode),
		Evidence: ev,
		Actions:  notes(unservedFix(servers, last.Procs)...),
	}, true
}

func stateOf(ps []app.ProcState, pid int) app.ProcState {
	for _, p := range ps {
		if p.PID == pid {
			return p
		}
	}
	return app.ProcState{PID: pid, State: app.StateGone}
}

// stateWord names a process state for a title.
func stateWord(p app.ProcState) string {
	switch p.State {
	case "T":
		return "stopped"
	case "t":
		return "traced, stopped"
	case "Z", "X":
		return "a zombie"
	case app.StateGone:
		return "gone"
	case "D":
		if p.Wchan != "" {
			return "stuck in " + p.Wchan
		}
		return "stuck in uninterruptible sleep"
	case "R":
		return "running"
	case "S":
		return "sleeping"
	}
	return "state " + p.State
}

func describeState(p app.ProcState) string {
	if p.State == "D" && p.Wchan != "" {
		return "D (" + p.Wchan + ")"
	}
	return p.State
}

// runOf says a sequence of states in runs: "T × 4", "D (folio_wait_bit) × 2, T × 1".
func runOf(states []string) string {
	var parts []string
	for i := 0; i < len(states); {
		j := i
		for j < len(states) && states[j] == states[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%s × %d", states[i], j-i))
		i = j
	}
	return strings.Join(parts, ", ")
}

// listenerAt is the listener with inode in the bundle's last snapshot
// that has it.
func listenerAt(b *evidence.Bundle, inode uint64) (evidence.Listener, bool) {
	if b == nil {
		return evidence.Listener{}, false
	}
	for i := len(b.Snapshots) - 1; i >= 0; i-- {
		if b.Snapshots[i].Sockets == nil {
			continue
		}
		for _, l := range b.Snapshots[i].Sockets.Listeners {
			if l.Inode == inode {
				return l, true
			}
		}
	}
	return evidence.Listener{}, false
}

func unservedFix(servers []int, procs []app.ProcState) []string {
	var out []string
	for _, pid := range servers {
		st := stateOf(procs, pid)
		switch st.State {
		case "T":
			out = append(out, fmt.Sprintf("continue it (kill -CONT %d) or restart it; a debugger attached to it holds it stopped until it detaches", pid))
		case "t":
			out = append(out, fmt.Sprintf("detach the tracer or debugger from pid %d (its TracerPid in /proc/%d/status)", pid, pid))
		case "D":
			out = append(out, fmt.Sprintf("pid %d waits in the kernel (%s): find what it waits for (cat /proc/%d/stack), or restart it", pid, st.Wchan, pid))
		default:
			out = append(out, fmt.Sprintf("pid %d no longer serves: restart the server so that a live process listens on the socket, or close it", pid))
		}
	}
	return out
}
