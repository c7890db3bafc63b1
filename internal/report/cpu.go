package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/cpuprof"
	"github.com/netdoctor/netdoctor/internal/load"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// loadSpan is when the load ran, from its timeline.
func loadSpan(l *load.Result) (from, to time.Time) {
	if l == nil || len(l.Timeline) == 0 {
		return
	}
	first, last := l.Timeline[0], l.Timeline[len(l.Timeline)-1]
	return first.Start, last.Start.Add(last.Length)
}

// LoadCPU sums a server's CPU accounting over the samples taken between
// from and to, and splits its run delay interval by interval.
func LoadCPU(s *app.Server, from, to time.Time) (c app.CPU, throttled, waiting time.Duration, n int) {
	idle := 0.0
	for _, smp := range s.Samples {
		if smp.CPU == nil || smp.CPU.Span <= 0 || smp.Time.Before(from) || smp.Time.After(to.Add(time.Second)) {
			continue
		}
		c = c.Add(*smp.CPU)
		th, w := smp.CPU.Split()
		throttled += th
		waiting += w
		idle += smp.CPU.IdleCPUs
		n++
	}
	if n > 0 {
		c.IdleCPUs = idle / float64(n)
	}
	return c, throttled, waiting, n
}

// CPULines say where a server's threads' time went during the load, a
// second at a time, its cgroup's limit and throttling, and its runtime.
func CPULines(s *app.Server, from, to time.Time) []string {
	var out []string
	c, throttled, waiting, n := LoadCPU(s, from, to)
	if n > 0 {
		secs := c.Span.Seconds()
		per := func(d time.Duration) string { return Dur(time.Duration(float64(d) / secs)) }
		line := fmt.Sprintf("threads' time a second during the load (%d threads", c.Threads)
		if c.CPUs > 0 {
			line += fmt.Sprintf(" on %d CPUs, %.1f idle", c.CPUs, c.IdleCPUs)
		}
		line += fmt.Sprintf("): on CPU %s, waiting for a CPU %s", per(c.OnCPU), per(waiting))
		if throttled > 0 || c.Periods > 0 {
			line += ", throttled " + per(throttled)
		}
		line += ", off CPU " + per(c.OffCPU())
		if c.Pressure > 0 {
			line += fmt.Sprintf("; CPU pressure %.0f%%", 100*c.Pressure.Seconds()/secs)
		}
		out = append(out, line)
		if len(c.Others) > 0 {
			var names []string
			for _, o := range c.Others {
				names = append(names, fmt.Sprintf("%s (pid %d)", o.Comm, o.PID))
			}
			out = append(out, "other processes on its CPUs while it waited: "+strings.Join(names, ", "))
		}
	}
	if g := s.CGroup; g != nil && g.Version != 0 {
		line := fmt.Sprintf("cgroup v%d %s", g.Version, g.Path)
		if g.Limit != nil {
			line += ": CPU limit " + g.Limit.String()
			if g.Limit.Path != g.Path {
				line += " set on " + g.Limit.Path
			}
			if n > 0 && c.Periods > 0 {
				line += fmt.Sprintf(", throttled in %d of %d periods during the load", c.Throttled, c.Periods)
			}
		} else {
			line += ": no CPU limit"
		}
		out = append(out, line)
	}
	if rt := s.Runtime; rt != nil && rt.Name != "" {
		line := "runtime " + string(rt.Name)
		if rt.Version != "" {
			line += " " + rt.Version
		}
		if rt.Parallelism > 0 {
			line += fmt.Sprintf(", %d at once (%s)", rt.Parallelism, rt.Source)
		}
		if rt.QuotaAware {
			line += ", sizes itself to a CPU quota"
		}
		out = append(out, line)
	}
	return out
}

// ProfileText prints the servers' on-CPU profile: per server, what its
// samples went to where netdoctor knows the functions, and its hottest
// functions.
//
// The functions are named from the servers' binaries (another user's
// symbols), the processes by their own names: each is escaped.
func ProfileText(w io.Writer, p *cpuprof.Summary, why string) {
	w = printable.NewWriter(w)
	v := printable.String
	if p == nil {
		if why != "" {
			fmt.Fprintf(w, "\nOn-CPU profile: none (%s)\n", v(why))
		}
		return
	}
	kept := uint64(0)
	for _, s := range p.Servers {
		kept += s.Samples
	}
	fmt.Fprintf(w, "\nOn-CPU profile of the servers (%d Hz for %s, %d of the CPUs' %d samples theirs, %.0f%% idle", p.Hz, Dur(p.Duration), kept, p.Samples, 100*p.IdleShare)
	if p.Lost > 0 {
		fmt.Fprintf(w, ", %d lost", p.Lost)
	}
	fmt.Fprintf(w, "; its cost: %.2f%% of a core while sampling, %s of CPU to name the addresses):\n", 100*p.Cost.CoreShare, Dur(p.Cost.Symbolize))
	for _, s := range p.Servers {
		fmt.Fprintf(w, "  %s: %d samples (%s of CPU), %.0f%% in the kernel\n", v(s.Server), s.Samples, Dur(s.CPU), 100*s.KernelShare)
		for _, a := range s.Activities {
			if a.Share < 0.02 {
				continue
			}
			fmt.Fprintf(w, "    %.0f%% %s (%s)\n", 100*a.Share, a.Kind.Describe(), v(strings.Join(a.Funcs, ", ")))
		}
		fmt.Fprintf(w, "    hottest functions (own samples, with callees):")
		for i, f := range s.Top {
			if i == 5 {
				break
			}
			fmt.Fprintf(w, "\n      %5.1f%% %5.1f%%  %s", 100*f.Self, 100*f.Total, v(f.Name))
			if f.Module == cpuprof.KernelModule {
				fmt.Fprintf(w, " [kernel]")
			}
			if f.Meaning != "" {
				fmt.Fprintf(w, ": %s", f.Meaning.Describe())
			}
		}
		fmt.Fprintln(w)
	}
	if len(p.Others) > 0 {
		var names []string
		for _, o := range p.Others {
			names = append(names, fmt.Sprintf("%s (pid %d) %d", v(o.Comm), o.PID, o.Samples))
		}
		fmt.Fprintf(w, "  other processes' samples on those CPUs: %s\n", strings.Join(names, ", "))
	}
	if p.Self > 0 {
		fmt.Fprintf(w, "  netdoctor's own samples (its load): %d\n", p.Self)
	}
	for _, n := range p.Notes {
		fmt.Fprintf(w, "  note: %s\n", v(n))
	}
}
