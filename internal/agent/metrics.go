package agent

import (
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

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
}

func newMetrics(a *Agent) *metrics {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("netdoctor_"+name, help, labels, nil)
	}
	return &metrics{
		a:                   a,
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
	n, b := a.ring.Len()
	gauge(m.windowSnapshots, float64(n))
	gauge(m.windowBytes, float64(b))
	counter(m.incidents, a.stats.incidents.Load())
	counter(m.incidentErrors, a.stats.incidentErrors.Load())
	gauge(m.watchesOpen, float64(len(a.watches.list())))
}

// registry holds the agent's metrics, the Go runtime's and the
// process's, and build information.
func (a *Agent) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newMetrics(a),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "netdoctor_build_info",
			Help:        "1, labelled with netdoctor's version and the Go version it was built with.",
			ConstLabels: prometheus.Labels{"version": a.cfg.Version, "goversion": runtime.Version()},
		}, func() float64 { return 1 }))
	return reg
}
