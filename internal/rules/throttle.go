package rules

import (
	"cmp"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cgroup"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// CPUQuotaThrottling: a server's cgroup used up its CPU quota in its
// periods and its threads waited, runnable, for the next one.
const CPUQuotaThrottling report.FindingID = "cpu-quota-throttling"

var _ = define(Class{ID: CPUQuotaThrottling,
	Critical: true,
	Delays:   true, Holds: true, Latency: true,
	Meaning:    "a server's cgroup uses up its CPU quota each period; its threads wait, runnable, for the next one while CPUs may idle",
	Active:     "in a run, the server's cgroup (v1 `cpu.cfs_quota_us`, v2 `cpu.max`, or an ancestor's) throttled in ≥ 10 % of its periods while its threads waited ≥ 50 ms a second for the quota (warning); critical at ≥ 50 % of periods with the threads held longer than they ran",
	LatentWhen: "—",
	Seed:       "a container with a CPU limit (issue 29)",
	ReportedBy: "`run`",
	Doc: `Rule ´throttle´ (´throttle.go´), in ´netdoctor run´. For each server whose cgroup has a CPU limit (v1
´cpu.cfs_quota_us´ over ´cpu.cfs_period_us´, v2 ´cpu.max´, on its group or an ancestor), over the samples
taken while the load ran: **active, warning** when the limiting group was throttled in at least 10 % of
its periods and the threads waited for the quota (the run delay's throttled part, above) at least 50 ms a
second; **critical** when at least half the periods were throttled and the threads waited for the quota
longer than they ran. Evidence: the limit with its file (´cgroup v1 /ndtest limits goapi 0.0.0.0:8080 to
0.2 CPU (20ms per 100ms period): cpu.cfs_quota_us 20000, cpu.cfs_period_us 100000 (…)´), the throttled
periods and the throttled time a second, what the threads ran and waited and so the CPUs they wanted
(on CPU + throttled, a second), the idle CPUs meanwhile, the CPU pressure, and what it adds to a request:
the longest stall of a throttled period (the period less the quota spread over the CPUs it wanted) and
the share of the load's p50 and p99 spent throttled (the time split). Fix: raise the limit to what it
wanted plus a fifth, in halves of a CPU (the ´echo´ into the file, or ´max´/´-1´ to remove it), where the
group comes from (systemd ´CPUQuota=´, Docker ´--cpus´, Kubernetes ´resources.limits.cpu´), and the
runtime matched to it where netdoctor can tell (´Runtime´): Go before 1.25 (from its build information,
read from ´/proc/PID/exe´) sizes ´GOMAXPROCS´ to the host's CPUs, not the quota, and so does any Go with
´GOMAXPROCS´ set higher in its environment; a JVM told more processors (´-XX:ActiveProcessorCount´) or
without container support; nginx's ´worker_processes´; a Python server's ´--workers´. Tested from the v1
capture and the v2 fixtures (a service's own ´cpu.max´, a Kubernetes pod's above its container), and in
a root test with a server in a v1 group limited to 0.2 CPU on an idle host.`,
})

var _ = register(Rule{Name: "throttle", Order: 210, Scope: PerRun, IDs: []report.FindingID{CPUQuotaThrottling}, Checks: "CPU quota throttling", Check: checkThrottle, LooksIn: accounted})

// Thresholds of cpu-quota-throttling.
const (
	// throttledPeriodsShare is the share of the quota's periods that
	// must end throttled: a group throttled in one period of ten now
	// and then is near its limit, not held by it.
	throttledPeriodsShare = 0.10
	// throttledPerSecond is the least time its threads must wait for
	// the quota each second of the load.
	throttledPerSecond = 50 * time.Millisecond
)

// checkThrottle finds servers whose threads were held by their
// cgroup's CPU quota during the load: the group was throttled in a
// tenth of its periods or more, and its threads waited runnable for the
// next period 50 ms a second or more. Critical when it was throttled in
// half its periods and its threads waited for the quota longer than
// they ran.
func checkThrottle(in *Input) []report.Finding {
	r := in.Run
	if r == nil || r.Load == nil {
		return nil
	}
	var out []report.Finding
	for _, s := range r.Servers {
		c, ok := loadCPU(r, s)
		if !ok || s.CGroup == nil || s.CGroup.Limit == nil || c.Periods == 0 {
			continue
		}
		throttled := c.throttled
		secs := c.Span.Seconds()
		share := float64(c.Throttled) / float64(c.Periods)
		if share < throttledPeriodsShare || secs <= 0 || time.Duration(float64(throttled)/secs) < throttledPerSecond {
			continue
		}
		l := *s.CGroup.Limit
		sev := report.Warning
		if share >= 0.5 && throttled >= c.OnCPU {
			sev = report.Critical
		}
		name := s.Kind + " " + s.Addr
		demand := (c.OnCPU + throttled).Seconds() / secs // the CPUs it would have used
		stall := stallPerPeriod(l, demand)
		ev := []report.Item{
			{Text: fmt.Sprintf("cgroup v%d %s limits %s to %s: %s", s.CGroup.Version, l.Path, name, l, quotaFile(s.CGroup)), Source: "cgroup"},
			{Text: fmt.Sprintf("throttled in %d of %d periods (%.0f%%) during the load; its run queues stayed throttled %s a second (summed over CPUs)",
				c.Throttled, c.Periods, 100*share, report.Dur(time.Duration(float64(c.ThrottledTime)/secs))), Source: "cpu.stat", Window: true},
			{Text: fmt.Sprintf("its %d threads ran %s a second (%.2f CPU) and waited, runnable, %s a second for the next period: they wanted %.2f CPUs",
				c.Threads, report.Dur(time.Duration(float64(c.OnCPU)/secs)), c.OnCPU.Seconds()/secs, report.Dur(time.Duration(float64(throttled)/secs)), demand), Source: "schedstat", Window: true},
		}
		if c.CPUs > 0 {
			ev = append(ev, report.Item{Text: fmt.Sprintf("meanwhile %.1f of the %d CPUs it may run on idled: the quota, not the host, held it", c.IdleCPUs, c.CPUs), Source: "/proc/stat", Window: true})
		}
		if c.Pressure > 0 && s.CGroup != nil {
			ev = append(ev, report.Item{Text: fmt.Sprintf("CPU pressure (some) %.0f%% of the time (%s)", 100*c.Pressure.Seconds()/secs, s.CGroup.Pressure), Source: "psi", Window: true})
		}
		lat := fmt.Sprintf("a request that arrives while the group is throttled waits up to ~%s for the next period", report.Dur(stall))
		if ts := TimeSplit(r); ts != nil {
			if p50, p99 := ts.P50.Share(report.BucketThrottled), ts.P99.Share(report.BucketThrottled); p50 > 0 || p99 > 0 {
				lat += fmt.Sprintf(": of the load's p50 %s, ~%s (%.0f%%) was spent throttled; of its p99 %s, ~%s (%.0f%%)",
					report.Dur(ts.P50.Latency), report.Dur(time.Duration(p50*float64(ts.P50.Latency))), 100*p50,
					report.Dur(ts.P99.Latency), report.Dur(time.Duration(p99*float64(ts.P99.Latency))), 100*p99)
			}
		}
		ev = append(ev, report.Item{Text: lat, Source: "load", Window: true})
		out = append(out, report.Finding{ID: CPUQuotaThrottling, Severity: sev, Status: report.Active, Subject: name, Side: r.ServerSide(),
			About:    report.About{Server: s.Kind, Listen: s.Addr},
			Title:    fmt.Sprintf("CPU quota throttling: %s is held by its cgroup's limit of %s in %.0f%% of periods", name, strconv.FormatFloat(math.Round(l.CPUs()*100)/100, 'f', -1, 64)+" CPU", 100*share),
			Evidence: ev, Actions: throttleFix(s, l, demand)})
	}
	return out
}

// stallPerPeriod is how long a group that wants demand CPUs stands
// still in a throttled period: its quota lasts quota/demand of it.
func stallPerPeriod(l cgroup.Limit, demand float64) time.Duration {
	if demand <= 0 {
		return 0
	}
	run := time.Duration(float64(l.Quota) / max(demand, 1))
	return max(l.Period-run, 0)
}

// quotaFile names the files of the limit, as the kernel shows them.
func quotaFile(g *cgroup.Group) string {
	l := g.Limit
	if g.Version == 2 {
		return fmt.Sprintf("cpu.max %q (%s)", fmt.Sprintf("%d %d", l.Quota.Microseconds(), l.Period.Microseconds()), l.File)
	}
	return fmt.Sprintf("cpu.cfs_quota_us %d, cpu.cfs_period_us %d (%s)", l.Quota.Microseconds(), l.Period.Microseconds(), l.File)
}

// throttleFix raises or removes the limit, and matches the runtime's
// parallelism to it.
func throttleFix(s *app.Server, l cgroup.Limit, demand float64) []report.Action {
	// Room for what it wanted, and a fifth more for bursts, in halves
	// of a CPU.
	want := math.Ceil(max(demand*1.2, l.CPUs()+0.5)*2) / 2
	quota := time.Duration(want * float64(l.Period))
	dir := path.Dir(l.File)
	why := fmt.Sprintf("raise the limit to %s CPUs: it wanted %.2f", trimCPU(want), demand)
	var fix []report.Action
	if strings.HasSuffix(l.File, "cpu.max") {
		fix = append(fix, report.Command(fmt.Sprintf("echo '%d %d' > %s/cpu.max", quota.Microseconds(), l.Period.Microseconds(), dir), why),
			report.Advise(fmt.Sprintf("or remove it: echo 'max %d' > %s/cpu.max", l.Period.Microseconds(), dir)))
	} else {
		fix = append(fix, report.Command(fmt.Sprintf("echo %d > %s/cpu.cfs_quota_us", quota.Microseconds(), dir), why),
			report.Advise(fmt.Sprintf("or remove it: echo -1 > %s/cpu.cfs_quota_us", dir)))
	}
	fix = append(fix, report.Advise(fmt.Sprintf("where the group comes from, set it there: systemd `systemctl set-property UNIT CPUQuota=%.0f%%`, Docker `docker update --cpus %s`, Kubernetes resources.limits.cpu %s (or no CPU limit, keeping the request)",
		100*want, trimCPU(want), trimCPU(want))))
	return append(fix, notes(runtimeFix(s, l)...)...)
}

// runtimeFix matches the server's parallelism to its quota, by runtime,
// where netdoctor can tell: more threads running at once than the quota
// has CPUs use it up early in each period and stall the rest of it.
func runtimeFix(s *app.Server, l cgroup.Limit) []string {
	cpus := int(math.Ceil(l.CPUs()))
	rt := s.Runtime
	if rt == nil {
		return []string{fmt.Sprintf("match the server's threads to the quota: no more than %d running at once (worker and thread-pool sizes)", cpus)}
	}
	over := rt.Parallelism > cpus
	switch rt.Name {
	case app.RuntimeGo:
		switch {
		case rt.Parallelism > 0 && over:
			return []string{fmt.Sprintf("Go runs %d threads at once (%s) on a quota of %s CPU: set GOMAXPROCS=%d", rt.Parallelism, rt.Source, trimCPU(l.CPUs()), cpus)}
		case rt.QuotaAware:
			return []string{fmt.Sprintf("Go %s already sizes GOMAXPROCS to the quota (%d)", rt.Version, cpus)}
		case rt.Parallelism == 0:
			return []string{fmt.Sprintf("Go %s sizes GOMAXPROCS to the host's CPUs, not the quota: set GOMAXPROCS=%d, build with Go 1.25 or later, or import go.uber.org/automaxprocs", rt.Version, cpus)}
		}
	case app.RuntimeJava:
		switch {
		case rt.Parallelism > 0 && over:
			return []string{fmt.Sprintf("the JVM sizes its GC and pools for %d processors (%s): set -XX:ActiveProcessorCount=%d", rt.Parallelism, rt.Source, cpus)}
		case !rt.QuotaAware:
			return []string{fmt.Sprintf("the JVM runs with -XX:-UseContainerSupport and sizes its GC and pools for the host's CPUs: drop it or set -XX:ActiveProcessorCount=%d", cpus)}
		}
	case app.RuntimeNginx:
		if over {
			return []string{fmt.Sprintf("nginx runs %d workers (%s) on a quota of %s CPU: worker_processes %d;", rt.Parallelism, rt.Source, trimCPU(l.CPUs()), cpus)}
		}
	case app.RuntimePython, app.RuntimeGunicorn, app.RuntimeUvicorn:
		if over {
			return []string{fmt.Sprintf("%d worker processes (%s) on a quota of %s CPU: --workers %d", rt.Parallelism, rt.Source, trimCPU(l.CPUs()), cpus)}
		}
	}
	return nil
}

func trimCPU(f float64) string { return strconv.FormatFloat(math.Round(f*100)/100, 'f', -1, 64) }

// cpuLoad is a server's CPU accounting summed over the load.
type cpuLoad struct {
	app.CPU
	// throttled and waiting are the run delay split interval by
	// interval (app.CPU.Split); IdleCPUs is the intervals' average.
	throttled, waiting time.Duration
	samples            int
	// others sums each other process's time on the server's CPUs.
	others []app.Neighbour
}

// loadCPU sums a server's CPU accounting over the samples taken while
// the load ran; ok is false without any.
func loadCPU(r *evidence.Run, s *app.Server) (cpuLoad, bool) {
	var c cpuLoad
	by := map[int]*app.Neighbour{}
	for _, smp := range r.Samples(s) {
		if smp.CPU == nil || smp.CPU.Span <= 0 {
			continue
		}
		idle := c.IdleCPUs*float64(c.samples) + smp.CPU.IdleCPUs
		c.CPU = c.CPU.Add(*smp.CPU)
		c.samples++
		c.IdleCPUs = idle / float64(c.samples)
		th, w := smp.CPU.Split()
		c.throttled += th
		c.waiting += w
		for _, o := range smp.CPU.Others {
			n := by[o.PID]
			if n == nil {
				n = &app.Neighbour{PID: o.PID, Comm: o.Comm}
				by[o.PID] = n
			}
			n.OnCPU += o.OnCPU
		}
	}
	for _, n := range by {
		c.others = append(c.others, *n)
	}
	slices.SortFunc(c.others, func(a, b app.Neighbour) int { return cmp.Or(cmp.Compare(b.OnCPU, a.OnCPU), cmp.Compare(a.PID, b.PID)) })
	return c, c.samples > 0
}
