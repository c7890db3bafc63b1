package rules

import (
	"fmt"
	"time"

	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// CPUSaturated: the CPUs are busy.
const CPUSaturated report.FindingID = "cpu-saturated"

var _ = define(Class{ID: CPUSaturated,
	Resource: "cpu",
	Delays:   true, Holds: true, Latency: true,
	Hold:       30 * time.Minute,
	Meaning:    "CPUs have no idle time left; other numbers are then symptoms",
	Active:     "a CPU ≥ 90 % busy over the window (warning)",
	LatentWhen: "none",
	Seed:       "000 stage 5",
	ReportedBy: "`check`, `diagnose`",
	Doc: `Rule ´cpu´ (´cpu.go´). It needs two snapshots at least 0.5 s apart. For each CPU line of ´/proc/stat´
present in both, busy = 1 − (idle + iowait ticks) / all ticks. A CPU is saturated at 90 % busy or more.
The finding is **active, warning**, whether all CPUs are saturated (´All CPUs are saturated´) or only
some (´1 of 2 CPUs are saturated while others have idle time´). It explains other findings but is not
a network fault by itself. Evidence: ´cpu0 95% busy (softirq 60%)´ per saturated CPU, plus the
aggregate ´all CPUs: user …%, system …%, softirq …%´, and in a run with an on-CPU profile of the
servers on this host, where each server's CPU went: ´the on-CPU profile: burnsrv 127.0.0.1:7815 used
1.70 CPU, 89% of it in main.hashWork´ (with what the function does when netdoctor knows it). The fix
says where to look (´perf top´); when a saturated CPU spends at least a quarter of its time in softirq,
how to spread the receive work: RSS queues, interrupt affinity and RPS where the namespace has a
physical NIC (a hardware device whose driver is known, or devices the bundle does not describe), only
RPS or fewer, larger packets where its devices are all virtual (a veth, a bridge: no ring, interrupt or
RSS). Tested by TestCPUSoftIRQAdvice.`,
})

var _ = register(Rule{Name: "cpu", Order: 110, Scope: PerHost, IDs: []report.FindingID{CPUSaturated}, Checks: "CPU", Check: checkCPU})

// checkCPU finds CPUs with no idle time left in the window. A saturated
// CPU makes every other number a symptom, so this is reported first among
// equals; a single saturated CPU among idle ones usually means interrupts
// or one thread carry all the work.
func checkCPU(in *Input) []report.Finding {
	b := in.Bundle
	w, ok := b.Window()
	if !ok || w.Duration().Seconds() < 0.5 {
		return nil
	}
	first := map[int]evidence.CPU{}
	for _, c := range w.First.CPU {
		first[c.CPU] = c
	}
	var items []report.Item
	var maxSoft float64
	var total, busy float64
	maxIdle := 0.0 // the idlest CPU's idle share
	var aggregate struct{ user, sys, soft, idle, total float64 }
	for _, c := range w.Last.CPU {
		f, ok := first[c.CPU]
		if !ok {
			continue
		}
		// Ticks may go down (iowait does, see proc(5)): use signed
		// deltas clamped at zero.
		t := tickDelta(c.Total(), f.Total())
		if t <= 0 {
			continue
		}
		idle := tickDelta(c.Idle+c.IOWait, f.Idle+f.IOWait)
		if c.CPU < 0 {
			aggregate.total = t
			aggregate.user = tickDelta(c.User+c.Nice, f.User+f.Nice)
			aggregate.sys = tickDelta(c.System, f.System)
			aggregate.soft = tickDelta(c.SoftIRQ, f.SoftIRQ)
			aggregate.idle = idle
			continue
		}
		total++
		maxIdle = max(maxIdle, idle/t)
		if u := 1 - idle/t; u >= cpuSaturatedShare {
			busy++
			maxSoft = max(maxSoft, tickDelta(c.SoftIRQ, f.SoftIRQ)/t)
			items = append(items, report.Item{
				Text:   fmt.Sprintf("cpu%d %.0f%% busy (softirq %.0f%%)", c.CPU, 100*u, 100*tickDelta(c.SoftIRQ, f.SoftIRQ)/t),
				Source: "/proc/stat", Window: true,
			})
		}
	}
	if busy == 0 {
		return nil
	}
	// "Others have idle time" means time a thread could use: a hot CPU
	// beside others 80% busy is a host near its limit, not one CPU
	// carrying the work.
	if busy < total && maxIdle < minSpareIdle {
		return nil
	}
	// A run's load generator on this host takes CPU for what it was
	// asked to do; saturation it accounts for is the load's, not the
	// host's (measure from another host to see the server's).
	if g, ok := generatorCPUs(in, w.Duration()); ok && aggregate.total > 0 {
		hostBusy := (1 - aggregate.idle/aggregate.total) * total
		if busy == total && hostBusy-g < cpuSaturatedShare*total || busy < total && g >= cpuSaturatedShare*busy {
			return nil
		}
	}
	f := report.Finding{ID: CPUSaturated, Severity: report.Warning, Status: report.Active, Evidence: items,
		Actions: notes("see where the time goes: `perf top` or `perf record -a -g` (sy and si: kernel networking; us: the application)")}
	if maxSoft >= highSoftIRQ {
		f.Actions = append(f.Actions, notes(softIRQAdvice(w.Last))...)
	}
	// Saturation is a warning, not critical: it explains other findings
	// but is not by itself a network fault.
	if busy == total {
		f.Title = "All CPUs are saturated"
	} else {
		f.Title = fmt.Sprintf("%d of %d CPUs are saturated while others have idle time", int(busy), int(total))
	}
	if aggregate.total > 0 {
		f.Evidence = append(f.Evidence, report.Item{
			Text:   fmt.Sprintf("all CPUs: user %.0f%%, system %.0f%%, softirq %.0f%%", 100*aggregate.user/aggregate.total, 100*aggregate.sys/aggregate.total, 100*aggregate.soft/aggregate.total),
			Source: "/proc/stat", Window: true,
		})
	}
	f.Evidence = append(f.Evidence, hottest(in)...)
	return []report.Finding{f}
}

// hottest says, in a run with an on-CPU profile of the servers on this
// host, where their CPU went: each server's hottest function.
func hottest(in *Input) []report.Item {
	if in.Run == nil || in.Run.Profile == nil || !in.ServerSide() {
		return nil
	}
	sum, err := cpuprof.Summarize(in.Run.Profile)
	if err != nil || sum == nil {
		return nil
	}
	var out []report.Item
	for _, s := range sum.Servers {
		if len(s.Top) == 0 || sum.Duration <= 0 {
			continue
		}
		f := s.Top[0]
		text := fmt.Sprintf("the on-CPU profile: %s used %.2f CPU, %.0f%% of it in %s", s.Server, s.CPU.Seconds()/sum.Duration.Seconds(), 100*f.Self, f.Name)
		if f.Meaning != "" {
			text += " (" + f.Meaning.Describe() + ")"
		}
		out = append(out, report.Item{Text: text, Source: "profile", Window: true})
	}
	return out
}

const (
	// cpuSaturatedShare is the busy share of a CPU's time from which it
	// counts as saturated.
	cpuSaturatedShare = 0.9
	// minSpareIdle is the idle share another CPU must have for one
	// saturated CPU to be the bottleneck among idle ones.
	minSpareIdle = 0.25
)

// generatorCPUs is how many CPUs' worth of time a run's load generator
// spent over window (the ticks' window, which holds the load), when it
// ran on the host of in's bundle: the client's side, or a side of the
// same boot.
func generatorCPUs(in *Input, window time.Duration) (float64, bool) {
	r := in.Run
	if r == nil || r.Load == nil || window <= 0 {
		return 0, false
	}
	c := r.Client()
	onClient := in.Side == report.Client || in.Side == report.Local
	if !onClient && c != nil && c.Bundle != nil && in.Bundle != nil {
		id := c.Bundle.Host.BootID
		onClient = id != "" && id == in.Bundle.Host.BootID
	}
	if !onClient {
		return 0, false
	}
	return r.Load.Self.CPUSeconds / window.Seconds(), true
}

// tick returns b-a as a float, or 0 if the counter went down.
func tickDelta(b, a uint64) float64 {
	if b < a {
		return 0
	}
	return float64(b - a)
}

// highSoftIRQ is the share of a saturated CPU's time in softirq from
// which its receive work is worth spreading: below it the time is the
// application's or the system calls'.
const highSoftIRQ = 0.25

// softIRQAdvice is how to spread receive work off a CPU busy in softirq:
// RSS queues and interrupt affinity only where the namespace has a
// physical NIC (a veth, a bridge, a tunnel has no ring, no interrupt and
// no RSS), RPS everywhere.
func softIRQAdvice(s *evidence.Snapshot) string {
	for _, i := range s.Interfaces {
		if physicalNIC(i) {
			return "high softirq on a saturated CPU: spread receive work over CPUs (RSS queues `ethtool -L " + i.Name + " combined N`, irqbalance or /proc/irq/*/smp_affinity, RPS `/sys/class/net/" + i.Name + "/queues/rx-*/rps_cpus`)"
		}
	}
	return "high softirq on a saturated CPU: this namespace's devices are virtual (no ring, interrupt or RSS to spread): spread their receive work with RPS (`/sys/class/net/<if>/queues/rx-*/rps_cpus`), or send fewer, larger packets (GRO, larger writes)"
}

// physicalNIC reports a device that may have rings, interrupts and RSS:
// a hardware device whose driver is known, or one the snapshot does not
// describe (a bundle without links: nothing says it is virtual).
func physicalNIC(i evidence.Interface) bool {
	if i.Name == "lo" {
		return false
	}
	kind := i.LinkKind
	if i.Link != nil {
		kind = i.Link.Kind
	}
	return kind == "" && i.Link == nil || kind == "device" && (i.Link == nil || i.Link.Driver != "")
}
