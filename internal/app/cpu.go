package app

import (
	"cmp"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/netdoctor/netdoctor/internal/cgroup"
	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
	"github.com/netdoctor/netdoctor/internal/procnet"
)

// CPU is one interval of a server's worker threads' time, as the
// scheduler (schedstat) and the CPU controller (cpu.stat) account it.
// Durations are thread time: four threads over one second hold 4 s.
type CPU struct {
	// Span is the interval, from the previous sample to this one.
	Span time.Duration `json:"span_ns"`
	// Threads are the threads seen at this sample; ThreadTime the time
	// they existed in the interval (Threads × Span, less the part of it
	// before a new thread started).
	Threads    int           `json:"threads"`
	ThreadTime time.Duration `json:"thread_ns"`
	// OnCPU is the time they ran. RunDelay is the time they were
	// runnable without running: waiting for a CPU, or for the next
	// period of a quota they had used up (Split tells which).
	OnCPU    time.Duration `json:"on_cpu_ns"`
	RunDelay time.Duration `json:"run_delay_ns"`
	// CPUs is how many CPUs the threads may run on (their affinity);
	// IdleCPUs how many of those idled over the interval, on average.
	CPUs     int     `json:"cpus"`
	IdleCPUs float64 `json:"idle_cpus"`
	// Periods, Throttled and ThrottledTime are the cgroup's quota
	// periods, those it was throttled in, and how long its run queues
	// stayed throttled (summed over CPUs), over the interval.
	Periods       uint64        `json:"periods,omitempty"`
	Throttled     uint64        `json:"throttled_periods,omitempty"`
	ThrottledTime time.Duration `json:"throttled_ns,omitempty"`
	// Pressure is the interval's CPU pressure, "some": how long at least
	// one task of the group (of the host, where the group has no
	// pressure file) was runnable and not running.
	Pressure time.Duration `json:"pressure_some_ns,omitempty"`
	// Others are the processes that took the most CPU on the threads'
	// CPUs in the interval, read when the threads waited for a CPU
	// while none of those idled: who else takes the CPU.
	Others []Neighbour `json:"others,omitempty"`
}

// Neighbour is another process's CPU time on a server's CPUs.
type Neighbour struct {
	PID   int           `json:"pid"`
	Comm  string        `json:"comm"`
	OnCPU time.Duration `json:"on_cpu_ns"`
}

// Split divides the run delay between the quota and CPU contention. A
// thread that waits while one of its CPUs idles is held back by its
// group's quota. Otherwise the quota accounts for the time the group's
// run queues stayed throttled times the threads that wanted to run on
// each (a throttled queue holds all of them; the kernel counts the
// queue once), and the rest of the wait went to the other threads that
// held the CPUs (its own or other processes').
func (c CPU) Split() (throttled, waiting time.Duration) {
	if c.Throttled == 0 || c.RunDelay <= 0 {
		return 0, max(c.RunDelay, 0)
	}
	if c.IdleCPUs >= 0.5 {
		return c.RunDelay, 0
	}
	per := 1.0 // threads wanting each CPU
	if c.Span > 0 && c.CPUs > 0 {
		per = max(1, float64(c.OnCPU+c.RunDelay)/float64(c.Span)/float64(c.CPUs))
	}
	t := min(c.RunDelay, time.Duration(float64(c.ThrottledTime)*per))
	return t, c.RunDelay - t
}

// OffCPU is the threads' time neither on a CPU nor runnable: blocked or
// sleeping, on what the wait classes say.
func (c CPU) OffCPU() time.Duration {
	return max(c.ThreadTime-c.OnCPU-c.RunDelay, 0)
}

// Add sums two intervals (of one server, one after the other): the
// neighbours are the latest's.
func (c CPU) Add(d CPU) CPU {
	c.Span += d.Span
	c.Threads = max(c.Threads, d.Threads)
	c.ThreadTime += d.ThreadTime
	c.OnCPU += d.OnCPU
	c.RunDelay += d.RunDelay
	c.CPUs = max(c.CPUs, d.CPUs)
	c.IdleCPUs = d.IdleCPUs
	c.Periods += d.Periods
	c.Throttled += d.Throttled
	c.ThrottledTime += d.ThrottledTime
	c.Pressure += d.Pressure
	if len(d.Others) > 0 {
		c.Others = d.Others
	}
	return c
}

// threadTimes are one thread's schedstat at a sample.
type threadTimes struct {
	onCPU, runDelay time.Duration
	gen             int
}

// cpuState is what a server's accounting keeps between two samples.
type cpuState struct {
	at      time.Time
	gen     int
	threads map[int]threadTimes // by TID
	group   *cgroup.Group
	stat    cgroup.Stat
	psi     time.Duration
	hasPSI  bool
	allowed []int
	// total is every interval since the first, for counters (metrics).
	total CPUTotal
}

// CPUTotal is a server's CPU accounting since it was first sampled,
// with its run delay split interval by interval (CPU.Split).
type CPUTotal struct {
	CPU
	// QuotaWait and CPUWait are the run delay's two parts: held by the
	// quota, waiting for a CPU.
	QuotaWait, CPUWait time.Duration
}

// hostCPU is /proc/stat's per-CPU ticks at one sample, shared by every
// server of an observer.
type hostCPU struct {
	at  time.Time
	cpu []kernel.CPU
}

// clockTick is USER_HZ, the unit of /proc's tick counters: 100 on every
// Linux architecture netdoctor builds for.
const clockTick = 100

// accountCPU adds one interval of CPU accounting to a server's sample:
// the workers' threads' schedstat since the last sample, the cgroup's
// throttling and pressure. The first sample of a server only sets the
// starting point.
func (o *Observer) accountCPU(s *Server, workers []int, now time.Time, host, prevHost *hostCPU) *CPU {
	st := o.cpuState(s, workers)
	fsys := procnet.Proc{FS: os.DirFS(o.proc)}
	st.gen++
	cur := CPU{}
	prevAt := st.at
	first := prevAt.IsZero()
	span := now.Sub(prevAt)
	uptime := uptimeAt(now)
	var allowed []int
	for _, pid := range workers {
		task := strconv.Itoa(pid) + "/task"
		tids, err := os.ReadDir(o.proc + "/" + task)
		if err != nil {
			continue
		}
		if allowed == nil {
			allowed = affinity(pid)
		}
		for _, t := range tids {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			ss, err := fsys.Schedstat(task + "/" + t.Name())
			if err != nil {
				continue
			}
			cur.Threads++
			old, seen := st.threads[tid]
			st.threads[tid] = threadTimes{onCPU: ss.OnCPU, runDelay: ss.RunDelay, gen: st.gen}
			if first {
				continue
			}
			life := span
			if !seen {
				// A thread born in the interval: all its time is the
				// interval's. One older than that was missed (a new
				// worker found late): it starts counting now.
				p, err := fsys.Stat(task + "/" + t.Name())
				if err != nil || uptime == 0 {
					continue
				}
				born := time.Duration(p.StartTime) * time.Second / clockTick
				if life = uptime - born; life > span || life < 0 {
					continue
				}
			}
			cur.ThreadTime += life
			cur.OnCPU += max(ss.OnCPU-old.onCPU, 0)
			cur.RunDelay += max(ss.RunDelay-old.runDelay, 0)
		}
	}
	for tid, tt := range st.threads {
		if tt.gen != st.gen {
			delete(st.threads, tid)
		}
	}
	st.at = now
	o.cpuMu.Lock()
	st.allowed = allowed
	o.cpuMu.Unlock()
	cur.Span = span
	cur.CPUs = len(allowed)
	if host != nil && prevHost != nil {
		cur.IdleCPUs = idleCPUs(prevHost.cpu, host.cpu, allowed)
	}
	if st.group != nil {
		stat, psi, err := st.group.Read(os.DirFS("/"))
		if err == nil || psi != nil {
			if !first {
				cur.Periods = sub(stat.Periods, st.stat.Periods)
				cur.Throttled = sub(stat.Throttled, st.stat.Throttled)
				cur.ThrottledTime = max(stat.ThrottledTime-st.stat.ThrottledTime, 0)
				if psi != nil && st.hasPSI {
					cur.Pressure = max(psi.Some.Total-st.psi, 0)
				}
			}
			st.stat = stat
			if psi != nil {
				st.psi, st.hasPSI = psi.Some.Total, true
			}
		}
	}
	if first {
		return nil
	}
	th, w := cur.Split()
	o.cpuMu.Lock()
	st.total.CPU = st.total.CPU.Add(cur)
	st.total.QuotaWait += th
	st.total.CPUWait += w
	o.cpuMu.Unlock()
	return &cur
}

// cpuState finds or starts a server's accounting; its cgroup is resolved
// once, from its first worker.
func (o *Observer) cpuState(s *Server, workers []int) *cpuState {
	o.cpuMu.Lock()
	defer o.cpuMu.Unlock()
	if o.cpu == nil {
		o.cpu = map[*Server]*cpuState{}
	}
	st := o.cpu[s]
	if st == nil {
		st = &cpuState{threads: map[int]threadTimes{}}
		o.cpu[s] = st
		for _, pid := range append(workers, s.PIDs...) {
			g, err := cgroup.Resolve(os.DirFS("/"), pid)
			if g != nil && (err == nil || g.Version != 0) {
				st.group = g
				s.CGroup = g
				break
			}
		}
	}
	return st
}

// Total is a server's CPU accounting summed since it was first
// sampled, for counters; ok is false before its second sample.
func (o *Observer) Total(s *Server) (CPUTotal, bool) {
	o.cpuMu.Lock()
	defer o.cpuMu.Unlock()
	st := o.cpu[s]
	if st == nil || st.total.Span == 0 {
		return CPUTotal{}, false
	}
	return st.total, true
}

func sub(a, b uint64) uint64 {
	if a < b {
		return 0 // the group was recreated
	}
	return a - b
}

// idleCPUs is how many of the allowed CPUs idled between two reads of
// /proc/stat, on average: each CPU's idle and iowait ticks over its
// ticks. No affinity known means every CPU.
func idleCPUs(prev, cur []kernel.CPU, allowed []int) float64 {
	before := map[int]kernel.CPU{}
	for _, c := range prev {
		before[c.CPU] = c
	}
	idle := 0.0
	for _, c := range cur {
		if c.CPU < 0 || (allowed != nil && !slices.Contains(allowed, c.CPU)) {
			continue
		}
		b, ok := before[c.CPU]
		if !ok || c.Total() <= b.Total() {
			continue
		}
		idle += float64(c.Idle+c.IOWait-min(b.Idle+b.IOWait, c.Idle+c.IOWait)) / float64(c.Total()-b.Total())
	}
	return idle
}

// readHostCPU reads /proc/stat's per-CPU lines.
func (o *Observer) readHostCPU(now time.Time) *hostCPU {
	c, err := procnet.Proc{FS: os.DirFS(o.proc)}.CPU()
	if err != nil && len(c) == 0 {
		return nil
	}
	return &hostCPU{at: now, cpu: c}
}

// maxNeighbours is how many other processes an interval names.
const maxNeighbours = 3

// maxScan bounds the processes a neighbour scan reads: on a host with
// more, the first ones /proc lists.
const maxScan = 8192

// procTicks is one process's CPU time at a scan of /proc.
type procTicks struct {
	comm      string
	ticks     uint64
	processor int
}

// contended reports whether an interval's threads waited for CPUs that
// never idled: then other threads held them, and it is worth naming
// which.
func contended(c *CPU) bool {
	if c == nil || c.ThreadTime <= 0 {
		return false
	}
	_, waiting := c.Split()
	return waiting*20 >= c.ThreadTime && c.IdleCPUs < 0.5
}

// scanOthers reads every process's CPU time (a read per process, so it
// runs only while some server is contended) and returns what each used
// since the previous scan; the first scan only sets the starting point.
func (o *Observer) scanOthers() map[int]procTicks {
	ents, err := os.ReadDir(o.proc)
	if err != nil {
		return nil
	}
	fsys := procnet.Proc{FS: os.DirFS(o.proc)}
	cur := make(map[int]procTicks, len(ents))
	delta := map[int]procTicks{}
	self := os.Getpid()
	for i, e := range ents {
		if i >= maxScan {
			break
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		p, err := fsys.StatCPU(e.Name())
		if err != nil {
			continue
		}
		pt := procTicks{comm: p.Comm, ticks: p.UTime + p.STime, processor: p.Processor}
		cur[pid] = pt
		if prev, ok := o.scan[pid]; ok && pt.ticks > prev.ticks {
			pt.ticks -= prev.ticks
			delta[pid] = pt
		}
	}
	first := o.scan == nil
	o.scan = cur
	if first {
		return nil
	}
	return delta
}

// neighbours are the processes of a scan, not the servers', that ran
// most on one of the allowed CPUs.
func neighbours(delta map[int]procTicks, skip map[int]bool, allowed []int) []Neighbour {
	var out []Neighbour
	for pid, p := range delta {
		if skip[pid] || (allowed != nil && !slices.Contains(allowed, p.processor)) {
			continue
		}
		out = append(out, Neighbour{PID: pid, Comm: p.comm, OnCPU: time.Duration(p.ticks) * time.Second / clockTick})
	}
	slices.SortFunc(out, func(a, b Neighbour) int { return cmp.Or(cmp.Compare(b.OnCPU, a.OnCPU), cmp.Compare(a.PID, b.PID)) })
	return out[:min(len(out), maxNeighbours)]
}
