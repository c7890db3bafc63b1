package rules

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// WorkerSaturated: a server's own workers are on CPU all the time while
// the host has CPUs to spare.
const WorkerSaturated report.FindingID = "worker-saturated"

var _ = define(Class{ID: WorkerSaturated,
	Delays: true, Latency: true, Blocks: true, AtCapacity: true,
	Meaning:    "the server's own workers are on CPU all the time while the host has idle CPUs: fewer workers or threads than CPUs (nginx `worker_processes`, a single-threaded event loop, GOMAXPROCS), so requests queue for them",
	Active:     "over the load (from its second second), a server's threads were on CPU ≥ 75 % and on CPU or runnable ≥ 80 % of the time of each thread it runs code on at once (its configured parallelism, else its threads), that parallelism below the CPUs it may use, while those CPUs idled ≥ 0.5 on average, over ≥ 20 requests and ≥ 2 samples (warning)",
	LatentWhen: "—",
	Seed:       "issue 37 (one nginx worker doing TLS handshakes on a two-CPU host)",
	ReportedBy: "`run`",
	Doc: `Rule ´workersat´ (´workersat.go´), in ´netdoctor run´. Each second the server's threads' CPU is
accounted from schedstat (´cpu´ in a sample): their time on CPU, runnable, the CPUs they may run on and
how many of those idled. The threads that run code at once are the runtime's configured parallelism
(nginx ´worker_processes´, php-fpm's children, GOMAXPROCS, gunicorn's ´--workers´), else every thread
the server has. **Active, warning** when, over the load's samples from its second second on, those
threads were on CPU at least 75 % and on CPU or runnable at least 80 % of the time, fewer of them than
the CPUs they may use, while those CPUs idled at least half a CPU on average: the server, not the host,
ran out. Title: ´nginx on 10.0.0.1:443 runs 1 worker, on CPU 86% of the load while the host's CPUs idle
0.7 of 2: requests queue for it (p50 102ms)´. Evidence: the threads' time by the scheduler, the host's
idle CPUs, the time split (where "unread in the server's sockets" is the queue for the worker). Fix:
as many workers as CPUs (nginx ´worker_processes auto;´ at its line, php-fpm ´pm.max_children´,
GOMAXPROCS unset, gunicorn ´--workers´), or a single-threaded event loop (Node, a Python asyncio or
´http.server´ program) run once per CPU (cluster, ´SO_REUSEPORT´) or made cheaper per request. It is
a cause of latency by itself, so app-slow ("holds requests while the CPU idles") is not made beside
it: the host idles, the server does not. An example split, one nginx worker doing RSA-4096 handshakes:
´p50 102ms ≈ unread in the server's sockets 80ms (79%), outside the servers' threads 11ms (11%), on CPU
6ms (6%), waiting for a CPU 2ms (2%)´. Tested (TestRunSaturatedWorker): named, with ´worker_processes auto;´;
and on a second kind of server (TestRunSaturatedWorkerGo: a Go program hashing 2 ms a request under
´GOMAXPROCS=1´, named with GOMAXPROCS); with the lab's healthy scenario and a fixed-rate load, not.`,
})

var _ = register(Rule{Name: "workersat", Order: 227, Scope: PerRun, IDs: []report.FindingID{WorkerSaturated},
	Checks: "the servers' own workers against the host's CPUs", Check: checkWorkerSaturated})

// Thresholds of a saturated worker: on CPU, and on CPU or runnable, as
// a share of the time of the threads the server runs code on at once;
// the host's idle CPUs that make it the server's limit, not the host's.
const (
	satOnCPU    = 0.75
	satBusy     = 0.8
	satIdleCPUs = 0.5
)

// workerLoad is a server's threads' CPU over the load.
type workerLoad struct {
	onCPU, runDelay, span time.Duration
	idleCPUs, threads     float64 // means over the samples
	cpus, samples         int
}

// workerLoadOf sums a server's CPU samples from the load's second
// second to its end: the first holds the load's ramp.
func workerLoadOf(r *evidence.Run, s *app.Server) workerLoad {
	var w workerLoad
	for _, smp := range s.Samples {
		c := smp.CPU
		if c == nil || c.Span <= 0 || smp.Time.Add(-c.Span).Before(r.LoadStart.Add(time.Second)) || smp.Time.After(r.LoadEnd.Add(c.Span/2)) {
			continue
		}
		w.onCPU += c.OnCPU
		w.runDelay += c.RunDelay
		w.span += c.Span
		w.idleCPUs += c.IdleCPUs
		w.threads += float64(c.ThreadTime) / float64(c.Span)
		w.cpus = max(w.cpus, c.CPUs)
		w.samples++
	}
	if w.samples > 0 {
		w.idleCPUs /= float64(w.samples)
		w.threads /= float64(w.samples)
	}
	return w
}

// parallelism is how many of a server's threads run its code at once:
// its runtime's configured parallelism, else its threads.
func parallelism(s *app.Server, w workerLoad) (int, string) {
	if s.Runtime != nil && s.Runtime.Parallelism > 0 {
		return s.Runtime.Parallelism, s.Runtime.Source
	}
	return int(math.Round(w.threads)), ""
}

// threadsBusy is the share of the time of n threads a server's threads
// were on CPU, and on CPU or runnable.
func (w workerLoad) threadsBusy(n int) (on, busy float64) {
	if w.span <= 0 || n <= 0 {
		return 0, 0
	}
	t := float64(w.span) * float64(n)
	return float64(w.onCPU) / t, float64(w.onCPU+w.runDelay) / t
}

func checkWorkerSaturated(in *Input) []report.Finding {
	r := in.Run
	if r == nil || r.Load == nil || r.Load.Requests < minSplitRequests {
		return nil
	}
	var out []report.Finding
	for _, s := range r.Servers {
		w := workerLoadOf(r, s)
		n, src := parallelism(s, w)
		on, busy := w.threadsBusy(n)
		if !saturated(w, n) {
			continue
		}
		out = append(out, workerSaturated(r, s, w, n, src, on, busy))
	}
	return out
}

// saturated: n threads of a server's load w were its limit, as this
// rule names it; tlscost reads it too, so that the two agree.
func saturated(w workerLoad, n int) bool {
	on, busy := w.threadsBusy(n)
	return w.samples >= 2 && n > 0 && n < w.cpus && on >= satOnCPU && busy >= satBusy && w.idleCPUs >= satIdleCPUs
}

func workerSaturated(r *evidence.Run, s *app.Server, w workerLoad, n int, src string, on, busy float64) report.Finding {
	lr := r.Load
	what := fmt.Sprintf("%d threads", n)
	if s.Nginx != nil || s.Pool != nil {
		what = fmt.Sprintf("%d workers", n) // processes of their own
	}
	if n == 1 {
		what = strings.TrimSuffix(what, "s")
	}
	ev := []report.Item{
		{Text: fmt.Sprintf("%s's threads on CPU %.0f%%, runnable %.0f%% of the time of its %s, on %d CPUs that idled %.1f on average",
			s.Kind, 100*on, 100*(busy-on), what, w.cpus, w.idleCPUs), Source: "schedstat", Window: true},
		{Text: fmt.Sprintf("responses took p50 %s, p99 %s over %d requests (%.0f/s)", report.Dur(lr.Latency.P50), report.Dur(lr.Latency.P99), lr.Requests, lr.RPS), Source: "load", Window: true},
	}
	if src != "" {
		ev = append(ev, report.Item{Text: fmt.Sprintf("%s runs code on %d at once: %s", s.Kind, n, src), Source: "config"})
	}
	if ts := TimeSplit(r); ts != nil {
		ev = append(ev, report.Item{Text: "where the time went: " + ts.Text(), Source: "schedstat", Window: true})
	}
	var fix []report.Action
	switch {
	case s.Nginx != nil:
		at := s.Nginx.WorkerProcesses.Source
		fix = append(fix, edit("nginx", at, fmt.Sprintf("run a worker per CPU: `worker_processes auto;` (%d CPUs) at %s, then nginx -s reload", w.cpus, orDefault(at)), "worker_processes auto;"))
	case s.Runtime != nil && s.Runtime.Name == app.RuntimeGo:
		fix = notes(fmt.Sprintf("let Go use every CPU: unset GOMAXPROCS (now %d) or set it to %d", n, w.cpus))
	case s.Runtime != nil && (s.Runtime.Name == app.RuntimeNode || s.Runtime.Name == app.RuntimePython || s.Runtime.Name == app.RuntimeUvicorn):
		fix = notes(fmt.Sprintf("a single-threaded event loop is one CPU at most: run one process per CPU (%d) behind the port (Node's cluster, uvicorn/gunicorn --workers, SO_REUSEPORT), or make each request cheaper", w.cpus))
	default:
		fix = notes(fmt.Sprintf("run as many workers or threads as CPUs (%d): php-fpm pm.max_children, gunicorn --workers, the server's thread pool, or one process per CPU on SO_REUSEPORT", w.cpus))
	}
	fix = append(fix, notes("or make each request cheaper: `perf record -g -p PID` shows where the workers' CPU goes")...)
	return report.Finding{ID: WorkerSaturated, Severity: report.Warning, Status: report.Active, Side: r.ServerSide(),
		Subject: s.Kind + " " + s.Addr, About: report.About{Server: s.Kind, Listen: s.Addr},
		Title: fmt.Sprintf("%s on %s runs %s, on CPU %.0f%% of the load while the host's CPUs idle %.1f of %d: requests queue for it (p50 %s)",
			s.Kind, s.Addr, what, 100*on, w.idleCPUs, w.cpus, report.Dur(lr.Latency.P50)),
		Evidence: ev, Actions: fix}
}

// orDefault is a setting's source, or where a setting not set is.
func orDefault(src string) string {
	if src == "" || src == "default" {
		return "its configuration"
	}
	return src
}
