package rules

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// Headroom is how far each resource a run's requests need was from its
// limit during the load, fullest first: the servers' worker pools and
// their pools to what they depend on, the listeners' accept queues, the
// CPUs, the conntrack table, the local ports towards the busiest
// destination, the interfaces' bandwidth, the servers' descriptors.
// capacity reports it for the step it diagnosed, so that beside what
// limited the capacity a reader sees what would limit it next. Each
// entry names the finding whose class reports its resource at the limit
// (Class.Resource), and whether found holds it active.
func Headroom(r *evidence.Run, found []report.Finding) []report.Headroom {
	if r == nil {
		return []report.Headroom{}
	}
	out := []report.Headroom{}
	add := func(h report.Headroom) {
		h.Finding = resourceOwner(h.Resource)
		if h.Limit > 0 {
			h.Share = h.Used / h.Limit
			out = append(out, h)
		}
	}
	b := serverBundle(r)
	for _, s := range r.Servers {
		if h, ok := poolHeadroom(r, s, b); ok {
			add(h)
		}
		for _, d := range s.Deps {
			if d.Conns == 0 || d.Busy <= 0 {
				continue
			}
			add(report.Headroom{Resource: "dependency-pool", Subject: s.Kind + " → " + depName(&d), Side: r.ServerSide(),
				Used: d.Busy * float64(d.Conns), Limit: float64(d.Conns), Unit: "connections",
				Text: fmt.Sprintf("%d connections from %s, each with a request outstanding %.0f %% of the time", d.Conns, s.Kind, 100*d.Busy)})
		}
	}
	seen := map[*evidence.Bundle]bool{}
	hosts := map[string]bool{} // the CPUs are a host's: one entry for two namespaces of it
	for _, side := range r.Sides {
		if !side.Observed || side.Bundle == nil || seen[side.Bundle] {
			continue
		}
		seen[side.Bundle] = true
		w := r.Window(side)
		name := side.Name
		if side.Name == report.Server {
			name = r.ServerSide()
		}
		for _, h := range sideHeadroom(r, w, name) {
			if h.Resource == "cpu" && w.Host.BootID != "" {
				if hosts[w.Host.BootID] {
					continue
				}
				hosts[w.Host.BootID] = true
				if name == report.Client || name == report.Local {
					h.Subject = "client's host (the load generator's too)"
				}
			}
			if h.Resource == "cpu" {
				h.Text += cpuShares(r, w, name)
			}
			add(h)
		}
	}
	for i := range out {
		for _, f := range found {
			if f.ID == out[i].Finding && f.Status == report.Active && (f.Side == "" || out[i].Side == "" || f.Side == out[i].Side) {
				out[i].Active = true
			}
		}
	}
	slices.SortStableFunc(out, func(a, b report.Headroom) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Subject, b.Subject))
	})
	return out
}

// poolHeadroom is a server's worker pool against its size: php-fpm's
// busy workers against pm.max_children; any other server's busy threads
// (those in a sleep, on a peer, a lookup or the disk) against the most
// that were busy at once, when requests waited unread for them (the
// pool was full), else against all its threads.
func poolHeadroom(r *evidence.Run, s *app.Server, b *evidence.Bundle) (report.Headroom, bool) {
	smps := r.Samples(s)
	if len(smps) == 0 {
		return report.Headroom{}, false
	}
	h := report.Headroom{Resource: "worker-pool", Subject: s.Kind + " " + s.Addr, Side: r.ServerSide(), Unit: "workers"}
	if p := s.Pool; p != nil && p.MaxChildren.Value > 0 {
		var sum, peak int
		for _, smp := range smps {
			busy := smp.Workers - smp.Waits[app.WaitIdle]
			if smp.Workers == 0 && smp.Pool != nil {
				busy = smp.Pool.Active - 1
			}
			sum += busy
			peak = max(peak, busy)
		}
		h.Subject = "php-fpm pool " + p.Name
		h.Used, h.Limit = float64(sum)/float64(len(smps)), float64(p.MaxChildren.Value)
		h.Text = fmt.Sprintf("%.1f of pm.max_children %d workers busy on average, %d at most", h.Used, p.MaxChildren.Value, peak)
		return h, true
	}
	if s.Nginx != nil {
		return report.Headroom{}, false // nginx's workers are event loops: its limits are connections (worker_connections)
	}
	busy := make([]int, len(smps))
	sum, threads := 0, 0
	for i, smp := range smps {
		for c, k := range smp.Waits {
			if parallel[c] || c == app.WaitRunning {
				busy[i] += k
			}
		}
		n := 0
		for _, k := range smp.Waits {
			n += k
		}
		threads = max(threads, n)
		sum += busy[i]
	}
	sorted := slices.Clone(busy)
	slices.Sort(sorted)
	pool := sorted[len(sorted)-1]
	if len(sorted) > 1 {
		pool = sorted[len(sorted)-2] // one sample's thread passing through is not the pool
	}
	mean := float64(sum) / float64(len(smps))
	if pool == 0 || threads == 0 {
		return report.Headroom{}, false
	}
	queued, peak := 0, 0
	if b != nil {
		queued, peak = queuedRequests(r, b, s.Addr)
	}
	// Threads that run (on a CPU or waiting for one) as many as the CPUs
	// they may use are no pool of their own: the CPUs are the limit (a
	// Go server's threads, or any pool as wide as the CPUs).
	if c, ok := cpuDemand(s, smps); ok && c.want >= atLimitCPU*c.cpus {
		return report.Headroom{Resource: "cpu", Subject: s.Kind + " " + s.Addr, Side: r.ServerSide(), Unit: "CPUs",
			Used: min(c.want, c.cpus), Limit: c.cpus, Queued: queued >= 2,
			Text: fmt.Sprintf("its threads ran on %.2f CPUs and waited for one %.2f more, on average, of the %s they may use (%s): they wanted all of them", c.on, c.want-c.on, trimCPU(c.cpus), c.why)}, true
	}
	h.Used = mean
	if queued >= 2 {
		h.Queued = true
		h.Limit = float64(pool)
		h.Text = fmt.Sprintf("%.1f of %d worker threads busy on average while up to %d requests waited unread for one (%d sampled seconds): the pool was full", mean, pool, peak, queued)
	} else {
		h.Limit = float64(threads)
		h.Text = fmt.Sprintf("%.1f of %d threads busy on average, %d at most; no request waited unread for one", mean, threads, pool)
	}
	return h, true
}

// sideHeadroom is one side's kernel resources over the load window.
func sideHeadroom(r *evidence.Run, w *evidence.Bundle, side report.Side) []report.Headroom {
	if w == nil || len(w.Snapshots) == 0 {
		return nil
	}
	var out []report.Headroom
	where := string(side)
	if busy, ok := hostBusy(w, r.LoadStart, r.LoadEnd); ok {
		cpus := float64(w.Host.CPUs)
		if cpus <= 0 {
			cpus = 1
		}
		out = append(out, report.Headroom{Resource: "cpu", Subject: where + "'s host", Side: side, Used: busy * cpus, Limit: cpus, Unit: "CPUs",
			Text: fmt.Sprintf("%.0f %% busy of %d CPUs over the load: all of the host's work", 100*busy, int(cpus))})
	}
	last := &w.Snapshots[len(w.Snapshots)-1]
	if ct := last.Conntrack; ct != nil && ct.Max > 0 {
		peak := ct.Count
		for _, s := range w.Snapshots {
			if s.Conntrack != nil {
				peak = max(peak, s.Conntrack.Count)
			}
		}
		out = append(out, report.Headroom{Resource: "conntrack", Subject: "nf_conntrack " + where, Side: side, Used: float64(peak), Limit: float64(ct.Max), Unit: "entries",
			Text: fmt.Sprintf("%d of nf_conntrack_max %d entries at most", peak, ct.Max)})
	}
	// The accept queues of the listeners the run's requests reached.
	queues := map[string]report.Headroom{}
	for _, s := range w.Snapshots {
		if s.Sockets == nil || s.Time.Before(r.LoadStart) {
			continue
		}
		for _, l := range s.Sockets.Listeners {
			if l.Proto == "unix" || l.SendQ == 0 || !r.Serves(l.Addr) {
				continue
			}
			h, ok := queues[l.Addr]
			if !ok || float64(l.RecvQ) > h.Used {
				queues[l.Addr] = report.Headroom{Resource: "accept-queue", Subject: l.Addr, Side: side, Used: float64(l.RecvQ), Limit: float64(l.SendQ), Unit: "connections",
					Text: fmt.Sprintf("%d connections waited to be accepted at most, of a backlog of %d", l.RecvQ, l.SendQ)}
			}
		}
	}
	for _, addr := range slices.Sorted(maps.Keys(queues)) {
		out = append(out, queues[addr])
	}
	if lo, hi, ok := portRange(last); ok {
		if rem := busiestRemote(w, nil); rem.Ephemeral > 1 {
			n := hi - lo + 1
			out = append(out, report.Headroom{Resource: "ports", Subject: where + " → " + rem.Addr, Side: side, Used: float64(rem.Ephemeral), Limit: float64(n), Unit: "ports",
				Text: fmt.Sprintf("%d local ports of ip_local_port_range's %d (%d–%d) held towards %s at most (%d ESTABLISHED, %d TIME_WAIT)", rem.Ephemeral, n, lo, hi, rem.Addr, rem.Established, rem.TimeWait)})
		}
	}
	for i := range last.Interfaces {
		for _, l := range limits(&last.Interfaces[i]) {
			u := measure(w, l)
			if u.totalTime <= 0 || l.bytesPerSec <= 0 {
				continue
			}
			out = append(out, report.Headroom{Resource: "bandwidth", Subject: l.iface + " " + l.dir, Side: side, Used: u.peak * 8, Limit: l.bytesPerSec * 8, Unit: "bit/s",
				Text: fmt.Sprintf("%s at most in a second, against the %s", bitrate(u.peak), limitName(l))})
		}
	}
	if side != report.Client {
		out = append(out, fdHeadroom(r, w, last, side)...)
	}
	return out
}

// fdHeadroom is the servers' descriptors against their RLIMIT_NOFILE:
// one row per command and limit, its fullest process's (a php-fpm or a
// gunicorn of fifty workers has fifty processes of one kind, and the
// one nearest its limit is what stops it; fifty rows at 0.0 % said
// nothing more).
func fdHeadroom(r *evidence.Run, w *evidence.Bundle, last *evidence.Snapshot, side report.Side) []report.Headroom {
	type kind struct {
		comm  string
		limit uint64
	}
	type fullest struct {
		pid, peak, n int
	}
	by := map[kind]*fullest{}
	var order []kind
	for _, p := range last.Processes {
		if p.NofileSoft == 0 || p.OpenFDs == 0 || !serves(r, p.PID) {
			continue
		}
		peak := p.OpenFDs
		for _, s := range w.Snapshots {
			for _, q := range s.Processes {
				if q.PID == p.PID {
					peak = max(peak, q.OpenFDs)
				}
			}
		}
		k := kind{p.Comm, p.NofileSoft}
		f := by[k]
		if f == nil {
			f = &fullest{pid: p.PID, peak: peak}
			by[k] = f
			order = append(order, k)
		} else if peak > f.peak {
			f.pid, f.peak = p.PID, peak
		}
		f.n++
	}
	var out []report.Headroom
	for _, k := range order {
		f := by[k]
		subject := fmt.Sprintf("%s (pid %d)", k.comm, f.pid)
		text := fmt.Sprintf("%d open descriptors at most, of its RLIMIT_NOFILE %d", f.peak, k.limit)
		if f.n > 1 {
			subject = fmt.Sprintf("%s (pid %d of %d)", k.comm, f.pid, f.n)
			text = fmt.Sprintf("%d open descriptors at most, of its RLIMIT_NOFILE %d: the fullest of %d %s processes", f.peak, k.limit, f.n, k.comm)
		}
		out = append(out, report.Headroom{Resource: "fds", Subject: subject, Side: side, Used: float64(f.peak), Limit: float64(k.limit), Unit: "descriptors", Text: text})
	}
	return out
}

// serves reports whether pid is one of the run's servers' processes.
func serves(r *evidence.Run, pid int) bool {
	for _, s := range r.Servers {
		if s.Master == pid || slices.Contains(s.PIDs, pid) {
			return true
		}
	}
	return false
}

// atLimitCPU is the share of the CPUs a server may use that its threads
// must want, running or runnable, for the CPUs to be its limit.
const atLimitCPU = 0.9

// demand is what a server's threads asked of the CPUs over the load.
type demand struct {
	on, want, cpus float64 // CPUs run on, run on or waited for, may use
	why            string  // what bounds cpus
}

// cpuDemand is the server's threads' CPU time over its samples (the
// scheduler's account, app.CPU): on CPU, and on CPU or waiting for one
// (run delay), as CPUs, against the CPUs they may use: their affinity,
// or their cgroup's quota when tighter. Time spent throttled waits for
// the quota, which is the limit then.
func cpuDemand(s *app.Server, smps []app.Sample) (demand, bool) {
	var span, on, delay time.Duration
	cpus := 0
	for _, smp := range smps {
		if c := smp.CPU; c != nil && c.Span > 0 {
			span += c.Span
			on += c.OnCPU
			delay += c.RunDelay
			cpus = max(cpus, c.CPUs)
		}
	}
	if span <= 0 || cpus == 0 {
		return demand{}, false
	}
	d := demand{on: float64(on) / float64(span), want: float64(on+delay) / float64(span), cpus: float64(cpus), why: "their affinity"}
	if g := s.CGroup; g != nil && g.Limit != nil && g.Limit.CPUs() > 0 && g.Limit.CPUs() < d.cpus {
		d.cpus, d.why = g.Limit.CPUs(), "the quota of "+g.Limit.Path
	}
	return d, true
}

// cpuShares says who took a host's CPUs over the load: each of the run's
// servers on it (their threads' time on CPU, from schedstat) and the
// load generator when it runs there, ": nginx 0.98 CPUs, php-fpm 0.61,
// the load generator 0.35". A host whose CPUs ran out is named with
// them, not as an unexplained distress.
func cpuShares(r *evidence.Run, w *evidence.Bundle, side report.Side) string {
	var parts []string
	if side != report.Client {
		for _, s := range r.Servers {
			if d, ok := cpuDemand(s, r.Samples(s)); ok && d.on >= 0.01 {
				parts = append(parts, fmt.Sprintf("%s %.2f", s.Kind, d.on))
			}
		}
	}
	genHere := side == report.Client || side == report.Local
	if c := r.Client(); c != nil && c.Bundle != nil && w.Host.BootID != "" && c.Bundle.Host.BootID == w.Host.BootID {
		genHere = true
	}
	if l := r.Load; l != nil && genHere && l.Elapsed > 0 && l.Self.CPUSeconds > 0 {
		parts = append(parts, fmt.Sprintf("the load generator %.2f", l.Self.CPUSeconds/l.Elapsed.Seconds()))
	}
	if len(parts) == 0 {
		return ""
	}
	return "; CPUs taken: " + strings.Join(parts, ", ")
}
