package report

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// RunText writes a run's report: the findings and the host picture of
// Text, the sides not observed, the servers behind the port, the
// throughput's shape, and the load in wrk's layout.
func RunText(w io.Writer, r *Run, latency bool) error {
	w = printable.NewWriter(w)
	if err := Text(w, r.Report); err != nil {
		return err
	}
	for _, s := range r.Sides {
		if !s.Observed {
			fmt.Fprintf(w, "\n%s side not observed: %s\n", s.Name, printable.String(s.Why))
		}
		if s.Agent != "" {
			fmt.Fprintf(w, "\n%s side observed through the agent at %s; its clock is %s this host's (± %s), its times are shown on this host's clock\n",
				s.Name, s.Agent, clockText(s.ClockOffset), s.ClockUncertainty.Round(time.Microsecond))
		}
		if s.Lost != "" {
			fmt.Fprintf(w, "PARTIAL: the %s side's %s; its findings rest on what came before\n", s.Name, printable.String(s.Lost))
		}
	}
	from, to := loadSpan(r.Load)
	writeServers(w, r.Servers, from, to)
	ProfileText(w, r.Profile, r.ProfileError)
	fmt.Fprintf(w, "\nThroughput over time: %s\n", r.Shape.Text)
	fmt.Fprintf(w, "\nLoad:\n")
	if err := LoadText(w, r.Load, latency); err != nil {
		return err
	}
	for _, n := range r.LoadNotes {
		if _, err := fmt.Fprintf(w, "The load: %s\n", printable.String(n)); err != nil {
			return err
		}
	}
	return nil
}

// clockText says how far another clock is from this host's.
func clockText(d time.Duration) string {
	switch r := d.Round(time.Microsecond); {
	case r == 0:
		return "within a microsecond of"
	case r > 0:
		return r.String() + " ahead of"
	default:
		return (-r).String() + " behind"
	}
}

// writeServers lists the applications found behind the port: what they
// are, the limits their configuration sets, and what their logs said.
// Everything in it but the counts is the servers' own (their names,
// paths, configuration values, log paths): each is escaped as a value.
func writeServers(w io.Writer, servers []*app.Server, from, to time.Time) {
	v := printable.String
	if len(servers) == 0 {
		return
	}
	fmt.Fprintf(w, "\nServers:\n")
	for _, s := range servers {
		fmt.Fprintf(w, "  %s %s on %s", s.Role, v(s.Kind), v(s.Addr))
		if s.Master != 0 {
			fmt.Fprintf(w, " (master %d, %d other processes)", s.Master, len(s.PIDs)-1)
		}
		if s.Config != "" {
			fmt.Fprintf(w, ", config %s", v(s.Config))
		}
		fmt.Fprintln(w)
		if n := s.Nginx; n != nil {
			fmt.Fprintf(w, "    worker_processes %s, worker_connections %s", v(n.WorkerProcesses.String()), v(n.WorkerConnections.String()))
			if n.WorkerRlimitNofile.Value > 0 {
				fmt.Fprintf(w, ", worker_rlimit_nofile %s", v(n.WorkerRlimitNofile.String()))
			}
			fmt.Fprintln(w)
			for _, u := range n.Upstreams {
				reuse := "connections reused"
				if !u.Reuse {
					reuse = "a new connection per request: " + v(u.Why)
				}
				fmt.Fprintf(w, "    %s %s (%s): %s\n", v(u.Pass), v(u.Target), v(u.PassSource), reuse)
			}
		}
		if p := s.Pool; p != nil {
			fmt.Fprintf(w, "    php-fpm pool %s: pm %s, pm.max_children %s, listen.backlog %s\n", v(p.Name), v(p.PM), v(p.MaxChildren.String()), v(p.Backlog.String()))
		}
		if line := busyLine(s.Samples); line != "" {
			fmt.Fprintf(w, "    %s\n", v(line))
		}
		for _, line := range CPULines(s, from, to) {
			fmt.Fprintf(w, "    %s\n", v(line))
		}
		writeDeps(w, s.Deps, "during the load")
		for _, l := range s.Logs {
			fmt.Fprintf(w, "    %s log %s: %d lines during the run", v(l.Kind), v(l.Path), l.Lines)
			if l.Status != "ok" && l.Status != "" {
				fmt.Fprintf(w, " (%s)", v(l.Status))
			}
			if top := l.TopMessages(1); len(top) > 0 && l.Kind != "access" {
				fmt.Fprintf(w, "; most often %d× %s", l.Messages[top[0]], v(strconv.Quote(top[0])))
			}
			fmt.Fprintln(w)
		}
		for _, n := range s.Notes {
			fmt.Fprintf(w, "    note: %s\n", v(n))
		}
	}
}

// busyLine is a server's threads as sampled each second, from the
// baseline to the tail: how many, how many were busy (neither idle in
// accept or poll nor on a futex, where an idle pool worker waits as well
// as one queued on a lock), and on what.
func busyLine(smps []app.Sample) string {
	if len(smps) == 0 {
		return ""
	}
	threads, futex := 0, 0
	var busy []string
	sum := map[string]int{}
	total := 0
	for _, smp := range smps {
		n, b := 0, 0
		for c, k := range smp.Waits {
			n += k
			if c != app.WaitIdle && c != app.WaitLock {
				b += k
				sum[c] += k
				total += k
			}
		}
		threads, futex = max(threads, n), max(futex, smp.Waits[app.WaitLock])
		busy = append(busy, strconv.Itoa(b))
	}
	line := fmt.Sprintf("threads sampled each second: up to %d, busy %s", threads, strings.Join(busy, " "))
	if total > 0 {
		classes := make([]string, 0, len(sum))
		for c := range sum {
			classes = append(classes, c)
		}
		slices.SortFunc(classes, func(a, b string) int { return cmp.Or(sum[b]-sum[a], strings.Compare(a, b)) })
		var parts []string
		for _, c := range classes {
			if p := 100 * sum[c] / total; p >= 1 {
				parts = append(parts, fmt.Sprintf("%s %d%%", c, p))
			}
		}
		line += " (" + strings.Join(parts, ", ") + ")"
	}
	if futex > 0 {
		line += fmt.Sprintf("; up to %d on a futex (idle pool workers, or a contended lock)", futex)
	}
	return line
}
