package agent

import (
	"cmp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/netdoctor/netdoctor/internal/app"
	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/report"
)

// metrics is the agent's /metrics: its current diagnosis as one series
// per finding, and its own health. Every value is read from the agent at
// scrape time; nothing is kept twice.
type metrics struct {
	a *Agent

	findingActive, findingLatent     *prometheus.Desc
	snapshots, snapshotSeconds       *prometheus.Desc
	rulesSeconds, ruleErrors         *prometheus.Desc
	collectorOK                      *prometheus.Desc
	windowSnapshots, windowBytes     *prometheus.Desc
	incidents, incidentErrors        *prometheus.Desc
	watchesOpen, lastSnapshotSeconds *prometheus.Desc
	scrapeSeconds                    *prometheus.Desc

	listenQueue, listenLimit, listenDrops      *prometheus.Desc
	listenConns, listenUnread                  *prometheus.Desc
	destConns, destPorts, portsAvailable       *prometheus.Desc
	ctEntries, ctLimit                         *prometheus.Desc
	ctDrop, ctEarlyDrop, ctInsertFailed        *prometheus.Desc
	appWorkers, appBusy, appLimit, appWaits    *prometheus.Desc
	appCPU, appQuota, appPeriods, appThrottled *prometheus.Desc
	appPressure, profiles, profileCPU          *prometheus.Desc

	depConns, depBusy, depRoundTrip, depRoundTrips *prometheus.Desc
	depTraced, depTraceConns, depTraceCPU          *prometheus.Desc

	drops, dropMonitorUp, dropsSeen, dropsOverflow *prometheus.Desc
	retransSegs, socketDrops, firewallPackets      *prometheus.Desc

	// local is the view of a listener that admits every local user
	// (--metrics-listen on loopback, no web configuration): only what
	// such a user reads anyway from /proc, /sys and sock_diag. It leaves
	// out which process owns a listener or a socket (ss -p shows a
	// user only their own), the applications and their dependencies
	// (the same link, and what their threads wait on, which needs
	// ptrace), the drop monitor's counts (BPF) and the firewall's rules
	// (CAP_NET_ADMIN); a finding's target is its listener, interface,
	// setting or drop reason, else its ID.
	local bool
}

func newMetrics(a *Agent, local bool) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("netdoctor_"+name, help, labels, nil)
	}
	return &metrics{
		a:                   a,
		local:               local,
		findingActive:       d("finding_active", "1 for each finding active in the agent's recent window: its counters rose within it.", "id", "severity", "target"),
		findingLatent:       d("finding_latent", "1 for each latent finding: a setting that will hurt at scale, not hurting now.", "id", "severity", "target"),
		snapshots:           d("agent_snapshots_total", "Snapshots the agent has taken."),
		snapshotSeconds:     d("agent_snapshot_duration_seconds", "Time the last snapshot took."),
		lastSnapshotSeconds: d("agent_last_snapshot_timestamp_seconds", "When the last snapshot was taken, as a Unix time."),
		rulesSeconds:        d("agent_rules_duration_seconds", "Time the last diagnosis of the recent window took."),
		ruleErrors:          d("agent_rule_errors_total", "Diagnoses that failed (a rule panicked); the agent kept running."),
		collectorOK:         d("agent_collector_ok", "1 when the collector's part of the last snapshot was complete, 0 when it was partial, unavailable or failed.", "collector"),
		windowSnapshots:     d("agent_window_snapshots", "Snapshots held in the rolling window."),
		windowBytes:         d("agent_window_bytes", "Compressed size of the snapshots held in the rolling window."),
		incidents:           d("agent_incidents_written_total", "Incident bundles written."),
		incidentErrors:      d("agent_incident_errors_total", "Incident bundles that could not be written."),
		watchesOpen:         d("agent_watches", "Servers watched for clients (runs from other hosts) right now."),
		scrapeSeconds:       d("agent_scrape_duration_seconds", "Time the previous scrape of /metrics took to gather."),

		listenQueue:  d("listener_accept_queue", "Connections in the listener's accept queue: handshakes completed, not yet accept()ed (ss's Recv-Q of a LISTEN socket).", "listener", "proto", "process"),
		listenLimit:  d("listener_accept_queue_limit", "The listener's effective backlog: min(listen() backlog, net.core.somaxconn) (ss's Send-Q of a LISTEN socket). The queue overflows above it.", "listener", "proto", "process"),
		listenDrops:  d("listener_drops_total", "Packets the listening socket dropped (sock_diag SK_MEMINFO_DROPS: SYNs and handshake ACKs dropped for a full accept or SYN queue): TcpExtListenDrops for this listener alone.", "listener", "proto", "process"),
		listenConns:  d("listener_connections", "Connections on the listener's port by state: established (accept queue included) and close_wait (closed by the client, not yet by the server).", "listener", "proto", "process", "state"),
		listenUnread: d("listener_unread_connections", "Established connections on the listener's port holding bytes the server has not read: requests waiting for a worker.", "listener", "proto", "process"),

		destConns:      d("destination_connections", "Outgoing TCP connections to one destination (address:port) by state: established, time_wait, other. The busiest 64 destinations.", "destination", "state"),
		destPorts:      d("destination_local_ports", "Local ports of ip_local_port_range in use towards one destination: connect() fails with EADDRNOTAVAIL when they reach netdoctor_local_ports_available.", "destination"),
		portsAvailable: d("local_ports_available", "Ports in net.ipv4.ip_local_port_range: the local ports one source address has for each destination."),

		ctEntries:      d("conntrack_entries", "Connections in the netfilter connection-tracking table of the observed namespace."),
		ctLimit:        d("conntrack_entries_limit", "The connection-tracking table's size, net.netfilter.nf_conntrack_max."),
		ctDrop:         d("conntrack_drop_total", "Packets dropped because a new connection could not be tracked: the table was full (conntrack stat drop, summed over CPUs)."),
		ctEarlyDrop:    d("conntrack_early_drop_total", "Tracked connections evicted to make room for new ones in a full table (conntrack stat early_drop)."),
		ctInsertFailed: d("conntrack_insert_failed_total", "Connections whose entry could not be inserted, e.g. a race between two packets of one new flow (conntrack stat insert_failed)."),

		appWorkers: d("app_workers", "Worker processes of the application serving a listener (its own processes when it has no master).", "app", "listener"),
		appBusy:    d("app_workers_busy", "Workers serving a request: php-fpm's status page when it has one, else the workers not idle in accept/poll.", "app", "listener"),
		appLimit:   d("app_workers_limit", "The pool's configured maximum of workers (php-fpm pm.max_children), when known.", "app", "listener"),
		appWaits:   d("app_threads", "Threads of the application's workers by what they wait on: running, idle, lock, file-lock, sleep, network, dns, disk, other.", "app", "listener", "wait"),

		appCPU:       d("app_thread_seconds_total", "Time of the application's worker threads since the agent followed it, by state (schedstat): on_cpu, throttled (runnable, held by the cgroup's CPU quota), waiting (runnable, waiting for a CPU other threads hold), off_cpu (blocked or sleeping).", "app", "listener", "state"),
		appQuota:     d("app_cpu_quota_cpus", "The CPU quota of the application's cgroup (the tightest from its group to the root), in CPUs: cpu.max or cpu.cfs_quota_us over the period. Absent without a limit.", "app", "listener", "cgroup"),
		appPeriods:   d("app_cgroup_periods_total", "Quota periods in which the application's limiting cgroup ran, since the agent followed it (cpu.stat nr_periods).", "app", "listener"),
		appThrottled: d("app_cgroup_throttled_periods_total", "Quota periods in which the application's limiting cgroup used up its quota and was throttled (cpu.stat nr_throttled).", "app", "listener"),
		appPressure:  d("app_cpu_pressure_seconds_total", "Time at least one task of the application's cgroup (of the host, where the group has no pressure file) was runnable and not running, since the agent followed it (PSI cpu some).", "app", "listener"),
		profiles:     d("agent_profiles_total", "On-CPU profiles the agent took, on request and on incidents."),
		profileCPU:   d("agent_profile_cpu_seconds", "CPU time the last on-CPU profile cost the agent: draining its rings and naming its addresses."),

		depConns:      d("dependency_connections", "Connections the application serving a listener held to one destination (a database, cache, backend) that carried requests in the last dependency trace: its pool. The busiest 8 destinations per application.", "app", "listener", "destination", "owner"),
		depBusy:       d("dependency_busy_ratio", "Share of the last trace each of those connections had a request outstanding, averaged over the pool: near 1, requests wait for a connection.", "app", "listener", "destination", "owner"),
		depRoundTrip:  d("dependency_round_trip_seconds", "Time each request to the destination kept a connection busy (busy time / round trips, or the mean of the round trips timed one by one from request to answer when most were), in the last trace. Absent when requests were pipelined or multiplexed on the connections.", "app", "listener", "destination", "owner"),
		depRoundTrips: d("dependency_round_trips_per_second", "Requests sent to the destination per second (data segments out) over its connections, in the last trace.", "app", "listener", "destination", "owner"),
		depTraced:     d("agent_dependency_trace_timestamp_seconds", "When the last dependency trace (a burst of 3 s every --dependency-every) ended, as a Unix time."),
		depTraceConns: d("agent_dependency_trace_connections", "Outbound connections the last dependency trace followed."),
		depTraceCPU:   d("agent_dependency_trace_cpu_seconds", "CPU time the last dependency trace took."),

		drops:           d("drops_total", "Packets the kernel freed as dropped in the observed namespace, by drop reason (SKB_DROP_REASON_* named from the kernel's BTF) and protocol, since the agent's drop monitor started.", "reason", "proto"),
		dropMonitorUp:   d("drop_monitor_up", "1 when the drop monitor (BPF on skb:kfree_skb) counts, 0 when it cannot run here (the agent's log and the snapshots' drops.unavailable say why)."),
		dropsSeen:       d("drop_monitor_seen_total", "Drops the monitor saw on the whole host, every namespace."),
		dropsOverflow:   d("drop_monitor_overflow_total", "Drops the monitor could not attribute to a reason and place: its bounded table was full."),
		retransSegs:     d("retransmitted_segments_total", "TCP segments the observed namespace retransmitted, by local address (the 64 flows that retransmitted most, merged by local address), since the drop monitor started.", "local"),
		socketDrops:     d("socket_drops_total", "Packets a UDP or TCP socket dropped itself (sock_diag SK_MEMINFO_DROPS: its receive buffer full, its backlog full), by local address: the 64 sockets that dropped most, merged by address.", "local", "proto", "process"),
		firewallPackets: d("firewall_rule_packets_total", "Packets counted by an nftables (or iptables-nft) rule that drops, rejects or limits, at most 256 rules.", "family", "table", "chain", "rule"),
	}
}

// Describe implements prometheus.Collector.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { prometheus.DescribeByCollect(m, ch) }

// Collect implements prometheus.Collector.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	a := m.a
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	if rep := a.Current(); rep != nil {
		seen := map[[3]string]bool{} // a finding on two sides is one series
		for _, f := range rep.Findings {
			d := m.findingActive
			if f.Status != report.Active {
				d = m.findingLatent
			}
			target := f.Subject
			if m.local {
				target = cmp.Or(f.About.Listen, f.About.Interface, f.About.Setting, f.About.DropReason)
			}
			if target == "" {
				target = string(f.ID)
			}
			k := [3]string{string(f.ID), string(f.Severity), target}
			if seen[k] {
				continue
			}
			seen[k] = true
			gauge(d, 1, k[:]...)
		}
	}
	counter(m.snapshots, a.stats.snapshots.Load())
	gauge(m.snapshotSeconds, time.Duration(a.stats.lastDuration.Load()).Seconds())
	if t := a.stats.lastSnapshot.Load(); t != 0 {
		gauge(m.lastSnapshotSeconds, float64(t)/1e9)
	}
	gauge(m.rulesSeconds, time.Duration(a.stats.lastEval.Load()).Seconds())
	counter(m.ruleErrors, a.stats.evalErrors.Load())
	if snaps := a.ring.Recent(); len(snaps) > 0 {
		for _, st := range snaps[len(snaps)-1].Status {
			v := 0.0
			if st.State == "ok" {
				v = 1
			}
			gauge(m.collectorOK, v, st.Collector)
		}
	}
	if last := a.latest(); last != nil {
		m.collectSnapshot(ch, last)
	}
	for _, v := range a.pools.views(time.Now(), 5*a.cfg.Interval+5*time.Second) {
		if m.local {
			break
		}
		gauge(m.appWorkers, float64(v.Sample.Workers), v.App, v.Listener)
		gauge(m.appBusy, float64(busy(v.Sample)), v.App, v.Listener)
		if v.Limit > 0 {
			gauge(m.appLimit, float64(v.Limit), v.App, v.Listener)
		}
		for _, w := range waitClasses {
			gauge(m.appWaits, float64(v.Sample.Waits[w]), v.App, v.Listener, w)
		}
		m.collectCPU(ch, v)
	}
	counter(m.profiles, a.stats.profiles.Load())
	if c := a.stats.lastProfileCPU.Load(); c != 0 {
		gauge(m.profileCPU, time.Duration(c).Seconds())
	}
	m.collectDeps(ch)
	if d := a.stats.lastScrape.Load(); d != 0 {
		gauge(m.scrapeSeconds, time.Duration(d).Seconds())
	}
	n, b := a.ring.Len()
	gauge(m.windowSnapshots, float64(n))
	gauge(m.windowBytes, float64(b))
	counter(m.incidents, a.stats.incidents.Load())
	counter(m.incidentErrors, a.stats.incidentErrors.Load())
	gauge(m.watchesOpen, float64(len(a.watches.list())))
}

// collectCPU writes a followed application's CPU accounting.
func (m *metrics) collectCPU(ch chan<- prometheus.Metric, v poolView) {
	counter := func(d *prometheus.Desc, val float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, val, labels...)
	}
	if g := v.CGroup; g != nil && g.Limit != nil {
		ch <- prometheus.MustNewConstMetric(m.appQuota, prometheus.GaugeValue, g.Limit.CPUs(), v.App, v.Listener, g.Limit.Path)
	}
	if !v.HasCPU {
		return
	}
	c := v.CPU
	counter(m.appCPU, c.OnCPU.Seconds(), v.App, v.Listener, "on_cpu")
	counter(m.appCPU, c.QuotaWait.Seconds(), v.App, v.Listener, "throttled")
	counter(m.appCPU, c.CPUWait.Seconds(), v.App, v.Listener, "waiting")
	counter(m.appCPU, c.OffCPU().Seconds(), v.App, v.Listener, "off_cpu")
	if v.CGroup != nil && v.CGroup.Limit != nil {
		counter(m.appPeriods, float64(c.Periods), v.App, v.Listener)
		counter(m.appThrottled, float64(c.Throttled), v.App, v.Listener)
	}
	if v.CGroup != nil && v.CGroup.Pressure != "" {
		counter(m.appPressure, c.Pressure.Seconds(), v.App, v.Listener)
	}
}

// collectDeps writes the last dependency trace's series.
func (m *metrics) collectDeps(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	views, conns, cpu, at := m.a.depViews(time.Now())
	if at.IsZero() {
		return
	}
	gauge(m.depTraced, float64(at.UnixNano())/1e9)
	gauge(m.depTraceConns, float64(conns))
	gauge(m.depTraceCPU, cpu.Seconds())
	if m.local {
		return
	}
	for _, v := range views {
		l := []string{v.App, v.Listener, v.Destination, v.Owner}
		gauge(m.depConns, float64(v.Dep.Conns), l...)
		if v.Dep.Untimed != "" {
			// A unix socket, or looks that lost the order of request and
			// answer: no busy share nor round trips measured,
			// and a 0 would say idle.
			continue
		}
		gauge(m.depBusy, v.Dep.Busy, l...)
		gauge(m.depRoundTrips, v.Dep.RoundTripsPerSec, l...)
		if v.Dep.RoundTrip > 0 && !v.Dep.Multiplexed() {
			gauge(m.depRoundTrip, v.Dep.RoundTrip.Seconds(), l...)
		}
	}
}

// waitClasses are app's wait classes, each a series even at 0 so that a
// class appearing is a change of value, not a new series.
var waitClasses = []string{app.WaitRunning, app.WaitIdle, app.WaitLock, app.WaitFile, app.WaitSleep, app.WaitNetwork, app.WaitDNS, app.WaitDisk, app.WaitOther}

// maxListeners bounds the per-listener series of one scrape; a host
// with more listens on ports nobody graphs one by one.
const maxListeners = 256

// collectSnapshot writes the series read from the latest snapshot: the
// listeners, the destinations, the local port range, conntrack.
func (m *metrics) collectSnapshot(ch chan<- prometheus.Metric, s *evidence.Snapshot) {
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	if sk := s.Sockets; sk != nil {
		for _, l := range mergeListeners(sk.Listeners, maxListeners) {
			lv := []string{l.Addr, l.Proto, m.owner(l.Process)}
			gauge(m.listenQueue, float64(l.RecvQ), lv...)
			gauge(m.listenLimit, float64(l.SendQ), lv...)
			counter(m.listenDrops, l.Drops, lv...)
			if l.Proto != "unix" {
				gauge(m.listenConns, float64(l.Established), append(lv, "established")...)
				gauge(m.listenConns, float64(l.CloseWait), append(lv, "close_wait")...)
				gauge(m.listenUnread, float64(l.Unread), lv...)
			}
		}
		for _, r := range sk.Remotes {
			gauge(m.destConns, float64(r.Established), r.Addr, "established")
			gauge(m.destConns, float64(r.TimeWait), r.Addr, "time_wait")
			gauge(m.destConns, float64(r.Other), r.Addr, "other")
			gauge(m.destPorts, float64(r.Ephemeral), r.Addr)
		}
	}
	if f := strings.Fields(s.Sysctls["net.ipv4.ip_local_port_range"]); len(f) == 2 {
		lo, err1 := strconv.Atoi(f[0])
		hi, err2 := strconv.Atoi(f[1])
		if err1 == nil && err2 == nil && hi >= lo {
			gauge(m.portsAvailable, float64(hi-lo+1))
		}
	}
	m.collectDrops(ch, s)
	if ct := s.Conntrack; ct != nil {
		gauge(m.ctEntries, float64(ct.Count))
		if ct.Max > 0 {
			gauge(m.ctLimit, float64(ct.Max))
		}
		if ct.Stats != nil {
			counter(m.ctDrop, ct.Stats["drop"])
			counter(m.ctEarlyDrop, ct.Stats["early_drop"])
			counter(m.ctInsertFailed, ct.Stats["insert_failed"])
		}
	}
}

// collectDrops writes the drop monitor's, the sockets' and the
// firewall's drops. Labels stay bounded: reasons are the kernel's enum,
// rows and rules are bounded in the snapshot.
func (m *metrics) collectDrops(ch chan<- prometheus.Metric, s *evidence.Snapshot) {
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	if d := s.Drops; d != nil {
		up := 0.0
		if d.Unavailable == "" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(m.dropMonitorUp, prometheus.GaugeValue, up)
		if up == 1 && !m.local {
			counter(m.dropsSeen, d.Seen)
			counter(m.dropsOverflow, d.Overflow)
			sum := map[[2]string]uint64{}
			var keys [][2]string
			for _, c := range d.Counts {
				k := [2]string{c.Reason, c.Proto}
				if _, ok := sum[k]; !ok {
					keys = append(keys, k)
				}
				sum[k] += c.Packets
			}
			for _, k := range keys {
				counter(m.drops, sum[k], k[:]...)
			}
			re := map[string]uint64{}
			var locals []string
			for _, r := range d.Retrans {
				if _, ok := re[r.Local]; !ok {
					locals = append(locals, r.Local)
				}
				re[r.Local] += r.Segments
			}
			for _, l := range locals {
				counter(m.retransSegs, re[l], l)
			}
		}
	}
	if sk := s.Sockets; sk != nil {
		sum := map[[3]string]uint64{}
		var keys [][3]string
		for _, d := range sk.Drops {
			k := [3]string{d.Local, d.Proto, m.owner(d.Process)}
			if _, ok := sum[k]; !ok {
				keys = append(keys, k)
			}
			sum[k] += d.Drops
		}
		for _, k := range keys {
			counter(m.socketDrops, sum[k], k[:]...)
		}
	}
	if fw := s.Firewall; fw != nil && !m.local {
		seen := map[[4]string]bool{}
		for _, r := range fw.Rules {
			k := [4]string{r.Family, r.Table, r.Chain, r.Text}
			if !r.Counted || seen[k] {
				continue
			}
			seen[k] = true
			counter(m.firewallPackets, r.Packets, k[:]...)
		}
	}
}

// owner is the process label of a listener or socket: empty in the
// local view, where a user sees only their own sockets' owners.
func (m *metrics) owner(process string) string {
	if m.local {
		return ""
	}
	return process
}

// mergeListeners makes one entry per address: sockets sharing it
// (SO_REUSEPORT) add their queues, limits and drops; the port's
// connection counts, which every socket of the port carries, are taken
// once. At most limit entries, in the snapshot's order.
func mergeListeners(ls []evidence.Listener, limit int) []evidence.Listener {
	var out []evidence.Listener
	at := map[[2]string]int{}
	for _, l := range ls {
		k := [2]string{l.Proto, l.Addr}
		if i, ok := at[k]; ok {
			o := &out[i]
			o.RecvQ += l.RecvQ
			o.SendQ += l.SendQ
			o.Drops += l.Drops
			continue
		}
		if len(out) == limit {
			continue
		}
		at[k] = len(out)
		out = append(out, l)
	}
	return out
}

// dnsMetrics accumulate the resolver probes the agent makes: each
// nameserver's answered probes' latency, and the probes sent and lost.
type dnsMetrics struct {
	duration *prometheus.HistogramVec
	probes   *prometheus.CounterVec
	lost     *prometheus.CounterVec
}

func newDNSMetrics() *dnsMetrics {
	return &dnsMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "netdoctor_resolver_probe_duration_seconds",
			Help:    "Time a nameserver took to answer the agent's probe (A and PTR queries sent straight to it; answered probes only).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"nameserver", "type"}),
		probes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netdoctor_resolver_probes_total",
			Help: "Probes the agent sent to a nameserver.",
		}, []string{"nameserver", "type"}),
		lost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "netdoctor_resolver_probes_lost_total",
			Help: "Probes a nameserver did not answer (timeout, refused, unreachable).",
		}, []string{"nameserver", "type"}),
	}
}

func (d *dnsMetrics) observe(ps []evidence.DNSProbe) {
	for _, p := range ps {
		d.probes.WithLabelValues(p.Server, p.Type).Inc()
		if p.Rcode == "" {
			d.lost.WithLabelValues(p.Server, p.Type).Inc()
			continue
		}
		d.duration.WithLabelValues(p.Server, p.Type).Observe(p.Duration.Seconds())
	}
}

// registry holds the agent's metrics, the Go runtime's and the
// process's, and build information.
func (a *Agent) registry() *prometheus.Registry { return a.registryOf(false) }

// registryOf is the registry of the full view, or of the local one
// (metrics.local).
func (a *Agent) registryOf(local bool) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetrics(a, local), a.dns.duration, a.dns.probes, a.dns.lost, a.apiRequests(),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "netdoctor_build_info",
			Help:        "1, labelled with netdoctor's version and the Go version it was built with.",
			ConstLabels: prometheus.Labels{"version": a.cfg.Version, "goversion": runtime.Version()},
		}, func() float64 { return 1 }))
	return reg
}
