package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// RunQueueContention: a server's threads were runnable and waited for
// CPUs that other processes held.
const RunQueueContention report.FindingID = "run-queue-contention"

var _ = define(Class{ID: RunQueueContention,
	Critical: true,
	Delays:   true, Holds: true, Latency: true,
	Meaning:    "a server's threads wait, runnable, for CPUs that other processes hold",
	Active:     "in a run, the threads waited for a CPU (run delay the quota does not explain) ≥ 10 % of their busy time and ≥ 50 ms a second, while other processes took ≥ 25 % of the server's CPUs and the requests spent ≥ 20 % of their p50 or p99 so (warning; critical when the others took half the CPUs and the threads waited twice as long as they ran)",
	LatentWhen: "—",
	Seed:       "a noisy neighbour on the server's CPUs",
	ReportedBy: "`run`",
	Doc: `Rule ´runqueue´ (´runqueue.go´), in ´netdoctor run´. **Active, warning** when a server's threads waited,
runnable, for a CPU — the run delay the quota does not explain — at least 10 % of their busy time (on CPU
+ run delay) and at least 50 ms a second of the load; other processes took at least 25 % of the CPUs it
may run on; and the requests spent at least 20 % of their p50 or p99 waiting so (the time split: on a
busy host every thread waits a little, the finding is for waits the requests feel). **Who else** is read
by the accounting, which, in each interval in which the threads waited for CPUs that never idled, reads
every process's CPU time (´/proc/PID/stat´, at most 8192 processes; netdoctor's own — the load
generator, an agent beside it, by the PIDs its sides report on one kernel, and the kernel's worker that sends its sides the connections' ends, ´kworker/…-sock_diag_events´ — and the run's servers never count) and names those last seen on the server's CPUs; else from the profile's samples of
other processes (on any CPU). **Critical** when the others took half the CPUs and the threads waited
twice as long as they ran. Threads that waited for each other, for the other servers of the run or for
the load generator are the stack's own sizing, not this finding (a healthy nginx + php-fpm lab that
saturates two CPUs under its load had 0.15 CPU of others). Evidence: the wait against the time on CPU,
the CPUs it may run on and how much they idled, who else ran there with their CPU, the CPU pressure, the
share of p50 and p99 spent waiting. Fix: move the neighbour off the server's CPUs or the server off its
(´taskset´, a cpuset cgroup), give it less weight (´renice´, ´cpu.weight´ / ´cpu.shares´), widen the
server's affinity when it was narrowed, or more CPUs. Tested in a root test with a server and a spinning
neighbour pinned to one CPU.`,
})

var _ = register(Rule{Name: "runqueue", Order: 220, Scope: PerRun, IDs: []report.FindingID{RunQueueContention}, Checks: "run-queue contention", Check: checkRunQueue, LooksIn: accounted})

// Thresholds of run-queue-contention.
const (
	// waitingShare is the least share of the threads' busy time (on CPU
	// or runnable) spent waiting for a CPU, not for the quota.
	waitingShare = 0.10
	// waitingPerSecond is the least wait a second of the load.
	waitingPerSecond = 50 * time.Millisecond
	// othersShare is the least CPU the other processes took on the
	// server's CPUs, as a share of those CPUs' time: less, and the
	// threads waited mostly for each other, for the other servers of the
	// run and for the load generator, which is the stack's own sizing
	// (measured: a healthy nginx + php-fpm lab saturating two CPUs with
	// its load had 0.15 CPU of others).
	othersShare = 0.25
	// waitingLatency is the least share of the load's p50 or p99 spent
	// waiting for a CPU (the time split): on a busy host every thread
	// waits a little; the finding is for waits the requests feel. A
	// fifth: the split also holds the time outside the server's threads
	// (the network, the load generator), a third of a fast request's
	// p50 (measured: a server pinned to one CPU with a spinning
	// neighbour, its threads waiting as long as they ran, had 23 to
	// 30 % of its p50 waiting for the CPU from run to run).
	waitingLatency = 0.20
)

// checkRunQueue finds servers whose threads waited for a CPU (run
// delay the quota does not explain) ≥ 10 % of their busy time and
// ≥ 50 ms a second, on CPUs of which other processes took ≥ 25 %, and
// whose requests spent ≥ 20 % of their p50 or p99 waiting so (the time
// split): who else takes the CPU, named. Critical when the others held
// half the CPUs and the threads waited twice as long as they ran.
func checkRunQueue(in *Input) []report.Finding {
	r := in.Run
	if r == nil || r.Load == nil {
		return nil
	}
	var out []report.Finding
	for _, s := range r.Servers {
		c, ok := loadCPU(r, s)
		secs := c.Span.Seconds()
		if !ok || secs <= 0 {
			continue
		}
		busy := c.OnCPU + c.RunDelay
		if busy <= 0 || float64(c.waiting) < waitingShare*float64(busy) || time.Duration(float64(c.waiting)/secs) < waitingPerSecond {
			continue
		}
		others, othersCPU := neighbours(r, s, c)
		if othersCPU.Seconds() < othersShare*secs*float64(max(c.CPUs, 1)) {
			continue
		}
		ts := TimeSplit(r)
		if ts != nil && ts.P50.Share(report.BucketWaiting) < waitingLatency && ts.P99.Share(report.BucketWaiting) < waitingLatency {
			continue
		}
		name := s.Kind + " " + s.Addr
		ev := []report.Item{
			{Text: fmt.Sprintf("its %d threads waited, runnable, %s a second for a CPU (run delay the quota does not explain), against %s a second on CPU: %.0f%% of their busy time",
				c.Threads, report.Dur(time.Duration(float64(c.waiting)/secs)), report.Dur(time.Duration(float64(c.OnCPU)/secs)), 100*float64(c.waiting)/float64(busy)), Source: "schedstat", Window: true},
		}
		where := "its CPUs"
		if c.CPUs > 0 {
			where = fmt.Sprintf("the %d CPU(s) it may run on", c.CPUs)
			ev = append(ev, report.Item{Text: fmt.Sprintf("%s idled %.2f CPU on average: busy", where, c.IdleCPUs), Source: "/proc/stat", Window: true})
		}
		ev = append(ev, report.Item{Text: fmt.Sprintf("who else ran there: %s", strings.Join(others, ", ")), Source: "process", Window: true})
		if c.Pressure > 0 && s.CGroup != nil {
			ev = append(ev, report.Item{Text: fmt.Sprintf("CPU pressure (some) %.0f%% of the time (%s)", 100*c.Pressure.Seconds()/secs, s.CGroup.Pressure), Source: "psi", Window: true})
		}
		if ts != nil {
			if p50, p99 := ts.P50.Share(report.BucketWaiting), ts.P99.Share(report.BucketWaiting); p50 > 0 || p99 > 0 {
				ev = append(ev, report.Item{Text: fmt.Sprintf("of the load's p50 %s, ~%s (%.0f%%) was spent waiting for a CPU; of its p99 %s, ~%s (%.0f%%)",
					report.Dur(ts.P50.Latency), report.Dur(time.Duration(p50*float64(ts.P50.Latency))), 100*p50,
					report.Dur(ts.P99.Latency), report.Dur(time.Duration(p99*float64(ts.P99.Latency))), 100*p99), Source: "load", Window: true})
			}
		}
		sev := report.Warning
		if c.waiting >= 2*c.OnCPU && othersCPU.Seconds() >= 0.5*secs*float64(max(c.CPUs, 1)) {
			sev = report.Critical // others held half its CPUs, and it waited twice as long as it ran
		}
		out = append(out, report.Finding{ID: RunQueueContention, Severity: sev, Status: report.Active, Subject: name, Side: r.ServerSide(),
			About:    report.About{Server: s.Kind, Listen: s.Addr},
			Title:    fmt.Sprintf("Run-queue contention: %s waits for CPUs other processes hold (%.0f%% of its threads' busy time)", name, 100*float64(c.waiting)/float64(busy)),
			Evidence: ev, Actions: notes(runQueueFix(s, c, hostCPUs(r))...)})
	}
	return out
}

// neighbours names the other processes that ran on the server's CPUs
// during the load, from its CPU accounting (which reads them while it
// waits), else from the profile, and their CPU time.
func neighbours(r *evidence.Run, s *app.Server, c cpuLoad) ([]string, time.Duration) {
	var names []string
	var total time.Duration
	secs := c.Span.Seconds()
	for i, n := range c.others {
		total += n.OnCPU
		if i < 3 {
			names = append(names, fmt.Sprintf("%s (pid %d) %.2f CPU", n.Comm, n.PID, n.OnCPU.Seconds()/secs))
		}
	}
	if p := r.Profile; len(names) == 0 && p != nil && p.Samples > 0 && p.Duration > 0 {
		// Samples of every CPU: a sample stands for 1/Hz of one CPU.
		for _, o := range p.Others {
			t := time.Duration(float64(o.Samples) / float64(p.Hz) * float64(time.Second))
			total += time.Duration(float64(t) * c.Span.Seconds() / p.Duration.Seconds())
			if len(names) < 3 {
				names = append(names, fmt.Sprintf("%s (pid %d) %.2f CPU, from the profile", o.Comm, o.PID, t.Seconds()/p.Duration.Seconds()))
			}
		}
	}
	return names, total
}

// runQueueFix separates the server from its neighbours.
func runQueueFix(s *app.Server, c cpuLoad, hostCPUs int) []string {
	pid := 0
	if len(s.PIDs) > 0 {
		pid = s.PIDs[0]
	}
	if s.Master != 0 {
		pid = s.Master
	}
	var fix []string
	if len(c.others) > 0 {
		n := c.others[0]
		fix = append(fix, fmt.Sprintf("move %s (pid %d) off the server's CPUs, or the server off its: `taskset -a -pc CPULIST %d` for the neighbour (a cpuset cgroup, or Kubernetes' static CPU manager, for good)", n.Comm, n.PID, n.PID),
			fmt.Sprintf("or give it less weight than the server: `renice -n 10 -p %d`, or its cgroup's cpu.weight (v2) / cpu.shares (v1) below the server's", n.PID))
	} else {
		fix = append(fix, "move the other processes off the server's CPUs, or the server off theirs (taskset, a cpuset cgroup), or give them less weight (renice, cpu.weight / cpu.shares)")
	}
	if c.CPUs > 0 && c.CPUs < hostCPUs && pid > 0 {
		fix = append(fix, fmt.Sprintf("the server may run on %d of the host's %d CPUs: if its affinity was not narrowed on purpose, widen it (`taskset -a -pc 0-%d %d`)", c.CPUs, hostCPUs, hostCPUs-1, pid))
	}
	fix = append(fix, "or give the host more CPUs: every runnable thread then finds one")
	return fix
}

// hostCPUs is the observed server side's CPU count, 0 when unknown.
func hostCPUs(r *evidence.Run) int {
	if b := serverBundle(r); b != nil {
		return b.Host.CPUs
	}
	return 0
}
