package tune

import (
	"fmt"
	"strconv"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
	"github.com/netdoctor/netdoctor/internal/sizing"
)

// This file fixes the findings of rules/workerpool.go: a php-fpm pool
// or nginx's workers out of room for the requests in flight.

// What the pool sizing assumes: php-fpm's own spawn rate, a worker's
// size when the report has none, the share of the memory a pool may
// take, and the time over which a burst must find its workers.
const (
	fpmSpawnRate       = 32 // pm.max_spawn_rate default: dynamic forks at most this many a second
	defaultPoolRSSMiB  = 32
	memoryShare        = 0.8 // of MemAvailable, at most, for a pool
	burstWindowSeconds = 1.0
)

var _ = planFix(rules.WorkerPoolExhausted, rankPool, (*builder).workers)

// workers sizes a php-fpm pool or nginx's worker_connections.
func (b *builder) workers(f report.Finding) error {
	if f.About.Server == "nginx" {
		return b.nginxConns(f)
	}
	var s *app.Server
	for _, c := range b.in.Servers {
		if c.Pool != nil && f.About.Pool == c.Pool.Name && (f.About.Listen == "" || f.About.Listen == c.Addr) {
			s = c
		}
	}
	if s == nil {
		return b.generic(f)
	}
	return b.sizePool(s, f)
}

// sizePool sizes pm.max_children for the requests in flight, and for
// every connection nginx keeps when fastcgi_keep_conn pins a worker to
// each.
func (b *builder) sizePool(s *app.Server, f report.Finding) error {
	p := s.Pool
	planned := atoi(b.poolPlanned[poolKey(s, "pm.max_children")])
	inflight := b.concurrency()
	front, u := b.upstreamOf(s.Addr)
	if front != nil && front.Nginx != nil && inflight > 0 {
		inflight = min(inflight, front.Nginx.Holds())
	}
	if inflight == 0 {
		inflight = 2 * p.MaxChildren.Value
	}
	want, spare := sizing.Pool(inflight, p.MaxChildren.Value)
	why := fmt.Sprintf("%d requests in flight (the load's connections", inflight)
	if front != nil {
		why += ", within what nginx can hold"
	}
	why += fmt.Sprintf(") plus %d spare (an eighth, at least %d, and one for the status page): %d", spare, sizing.PoolSpareMin, want)
	if u != nil && (b.keep[s.Addr] > 0 || u.Reuse) {
		why += fmt.Sprintf("; with fastcgi_keep_conn a worker stays with its nginx connection until nginx closes it, so the pool must cover every connection nginx holds (at most the requests in flight, %d)", inflight)
	}
	want, mem := b.fitMemory(f, p, want)
	why += mem
	switch {
	case want <= planned:
		// Another finding's change to the pool already covers it.
		b.files[poolFile(s)].addReason(f, "")
		return nil
	case want <= p.MaxChildren.Value:
		b.satisfied(f, fmt.Sprintf("pool %s's pm.max_children is already %d, at least the %d needed", p.Name, p.MaxChildren.Value, want))
		return nil
	}
	if err := b.editPool(s, "pm.max_children", strconv.Itoa(want), f, fmt.Sprintf("pm.max_children %d → %d: %s", p.MaxChildren.Value, want, why)); err != nil {
		return err
	}
	if p.PM != "static" && inflight > fpmSpawnRate*int(burstWindowSeconds) {
		return b.editPool(s, "pm", "static", f, fmt.Sprintf("pm %s → static: the load asked for %d workers at once and pm %s forks at most %d a second (pm.max_spawn_rate; ondemand one per request), so requests wait in the listen queue meanwhile; static keeps all %d (memory above)", p.PM, inflight, p.PM, fpmSpawnRate, want))
	}
	return nil
}

// nginxConns raises worker_connections to the connections a worker
// holds: its share of the clients plus one upstream connection each, and
// worker_rlimit_nofile to twice that.
func (b *builder) nginxConns(f report.Finding) error {
	var s *app.Server
	for _, c := range b.in.Servers {
		if c.Nginx != nil {
			s = c
			break
		}
	}
	if s == nil || b.concurrency() == 0 {
		return b.generic(f)
	}
	w := nginxWorkers(s)
	want, per := sizing.WorkerConnections(b.concurrency(), w)
	wc := s.Nginx.WorkerConnections
	if want <= wc.Value {
		b.satisfied(f, fmt.Sprintf("worker_connections is already %d, at least the %d needed", wc.Value, want))
		return nil
	}
	why := fmt.Sprintf("%d client connections over %d workers, each with an upstream connection: %d per worker; twice that, rounded up: %d", b.concurrency(), w, per, want)
	if err := b.editNginx(s, wc.Source, f, fmt.Sprintf("worker_connections %d → %d: %s", wc.Value, want, why), edit{replace: setNginxArgs("worker_connections", strconv.Itoa(want))}); err != nil {
		return err
	}
	if rl := s.Nginx.WorkerRlimitNofile; rl.Value < 2*want {
		why := fmt.Sprintf("worker_rlimit_nofile → %d: two descriptors per connection at most", 2*want)
		if _, _, ok := source(rl.Source); ok {
			return b.editNginx(s, rl.Source, f, why, edit{replace: setNginxArgs("worker_rlimit_nofile", strconv.Itoa(2*want))})
		}
		return b.editNginx(s, s.Nginx.WorkerProcesses.Source, f, why, edit{after: []string{fmt.Sprintf("worker_rlimit_nofile %d;", 2*want)}})
	}
	return nil
}

// fitMemory caps a pool's size at the workers that fit in a share of the
// memory available (never below the size it has), and says what the
// pool will take; the pool is left as wanted when the memory is unknown.
func (b *builder) fitMemory(f report.Finding, p *app.PoolInfo, want int) (int, string) {
	avail := b.h.MemAvailable()
	if avail == 0 {
		return want, ""
	}
	rss := p.WorkerRSS
	if rss == 0 {
		rss = defaultPoolRSSMiB << 20
	}
	budget := int(memoryShare * float64(avail) / float64(rss))
	if want > budget {
		b.note(f, fmt.Sprintf("%d workers at ~%d MiB each do not fit in %d MiB available: capped at %d; add memory or make requests shorter", want, rss>>20, avail>>20, budget))
		want = max(budget, p.MaxChildren.Value)
	}
	return want, fmt.Sprintf("; ~%d MiB each, %d MiB in all of %d MiB available", rss>>20, uint64(want)*rss>>20, avail>>20)
}
