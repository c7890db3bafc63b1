// Package alerts turns netdoctor's findings into Prometheus alerting
// rules: one alert per finding ID the agent's continuous diagnosis can
// make, firing while the agent's netdoctor_finding_active series for it
// is 1, and one per latent risk on netdoctor_finding_latent.
//
// The durations are chosen so that a healthy fleet stays quiet: the
// agent holds a finding active for its recent window (30 s by default)
// after the last counter rise, so a single dropped SYN during a deploy
// is active for 30 s and never fires; a fault that keeps its counters
// rising does.
package alerts

import (
	"cmp"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"

	"github.com/netdoctor/netdoctor/internal/report"
	"github.com/netdoctor/netdoctor/internal/rules"
)

// DefaultRunbook is where each alert's runbook_url points, with the
// finding's section as the anchor.
const DefaultRunbook = "https://github.com/netdoctor/netdoctor/blob/main/docs/findings.md"

const (
	// ForCritical holds a finding that can be critical: a fault that
	// drops connections or requests is worth a page within minutes.
	ForCritical = 2 * time.Minute
	// ForWarning holds the others: they degrade, they do not fail.
	ForWarning = 10 * time.Minute
	// ForLatent holds latent risks: settings change rarely, and an
	// hour keeps a rollout's transient states out.
	ForLatent = time.Hour
	// ForHealth holds the agent's own trouble: partial evidence.
	ForHealth = 15 * time.Minute
)

// Hold is how long a finding is active before its alert fires: its
// class's hold when it has one (findings whose counters rise now and then
// on busy, healthy hosts fire only when the condition lasts), else
// ForCritical for one that can be critical, ForWarning for the others.
func Hold(c rules.Class) time.Duration {
	switch {
	case c.Hold != 0:
		return c.Hold
	case c.Critical:
		return ForCritical
	}
	return ForWarning
}

// Options shape the rules.
type Options struct {
	// For, when not zero, replaces every duration: for tests, and for
	// those who want to see alerts at once.
	For time.Duration
	// Runbook is the findings document's URL (DefaultRunbook if empty).
	Runbook string
}

// Rule is one Prometheus alerting rule.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Group is a named list of rules, evaluated together.
type Group struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// File is a Prometheus rule file.
type File struct {
	Groups []Group `yaml:"groups"`
}

// Groups returns netdoctor's alerting rules: "netdoctor-findings" (one
// alert per active finding ID), "netdoctor-latent" (one per ID with a
// latent form) and "netdoctor-agent" (the agent's evidence is partial).
func Groups(o Options) []Group {
	if o.Runbook == "" {
		o.Runbook = DefaultRunbook
	}
	dur := func(d time.Duration) string {
		if o.For != 0 {
			d = o.For
		}
		return promDuration(d)
	}
	var ids []report.FindingID
	for _, r := range rules.Registry {
		for _, id := range r.IDs {
			if rules.Continuous(id) {
				ids = append(ids, id)
			}
		}
	}
	active := Group{Name: "netdoctor-findings"}
	latent := Group{Name: "netdoctor-latent"}
	for _, id := range ids {
		c := rules.ClassOf(id)
		d := Hold(c)
		active.Rules = append(active.Rules, Rule{
			Alert:  AlertName(id, false),
			Expr:   fmt.Sprintf(`netdoctor_finding_active{id=%q} == 1`, id),
			For:    dur(d),
			Labels: map[string]string{"status": "active"},
			Annotations: map[string]string{
				"summary":     fmt.Sprintf("%s on {{ $labels.instance }}: {{ $labels.target }}", id),
				"description": fmt.Sprintf("%s (%s, active: its evidence rose within the agent's recent window). The evidence and the fix: `netdoctor check --agent URL`, or the agent's /v1/findings.", upper(c.Meaning), "{{ $labels.severity }}"),
				"runbook_url": o.Runbook + "#" + Anchor(id),
			},
		})
		if !c.Latent {
			continue
		}
		latent.Rules = append(latent.Rules, Rule{
			Alert:  AlertName(id, true),
			Expr:   fmt.Sprintf(`netdoctor_finding_latent{id=%q} == 1`, id),
			For:    dur(ForLatent),
			Labels: map[string]string{"status": "latent"},
			Annotations: map[string]string{
				"summary":     fmt.Sprintf("latent %s on {{ $labels.instance }}: {{ $labels.target }}", id),
				"description": fmt.Sprintf("A setting that will hurt at scale, not hurting now: %s. The setting and its fix: `netdoctor check --agent URL`.", c.Meaning),
				"runbook_url": o.Runbook + "#" + Anchor(id),
			},
		})
	}
	health := Group{Name: "netdoctor-agent", Rules: []Rule{{
		Alert: "NetdoctorEvidencePartial",
		Expr:  `netdoctor_agent_collector_ok == 0`,
		For:   dur(ForHealth),
		// A warning, not a page: the diagnosis goes on with less.
		Labels: map[string]string{"severity": string(report.Warning)},
		Annotations: map[string]string{
			"summary":     "netdoctor's {{ $labels.collector }} evidence on {{ $labels.instance }} is partial",
			"description": "The agent's {{ $labels.collector }} collector has failed or been partial for a while: findings that need it cannot be made there (a missing capability, a kernel without the interface). The reason is in the agent's snapshots (status) and its log.",
			"runbook_url": strings.TrimSuffix(o.Runbook, "findings.md") + "agent.md",
		},
	}}}
	return []Group{active, latent, health}
}

// AlertName is the alert for a finding ID: "NetdoctorAcceptQueueOverflow",
// with "Latent" at the end for the latent form.
func AlertName(id report.FindingID, latent bool) string {
	var b strings.Builder
	b.WriteString("Netdoctor")
	for _, w := range strings.Split(string(id), "-") {
		if a, ok := acronyms[w]; ok {
			b.WriteString(a)
			continue
		}
		b.WriteString(upper(w))
	}
	if latent {
		b.WriteString("Latent")
	}
	return b.String()
}

// acronyms keep their capitals in alert names: NetdoctorCPUSaturated.
var acronyms = map[string]string{"cpu": "CPU", "dns": "DNS", "nic": "NIC", "fd": "FD", "syn": "SYN", "ack": "ACK"}

// Anchor is the finding's section in docs/findings.md as GitHub names
// it: the heading lower-cased, spaces to hyphens, punctuation dropped.
// The heading is the rules' (rules.Section): findings a rule documents
// together share one ("## dns-misconfigured, dns-slow, …").
func Anchor(id report.FindingID) string {
	return HeadingAnchor(cmp.Or(rules.Section(id), string(id)))
}

// HeadingAnchor is GitHub's anchor for a Markdown heading.
func HeadingAnchor(h string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// promDuration writes d as Prometheus does: "1h", "10m", "90s".
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// Header opens every file `netdoctor rules` writes.
const Header = "# Prometheus alerting rules for netdoctor's agent. Generated by `netdoctor rules`: regenerate, do not edit.\n# Each alert's runbook_url is the finding's section in docs/findings.md; docs/metrics.md lists the series.\n"

// Write writes the rules as a Prometheus rule file, or with operator
// true as a prometheus-operator PrometheusRule in namespace ns.
func Write(w io.Writer, o Options, operator bool, ns string) error {
	var doc any = File{Groups: Groups(o)}
	if operator {
		doc = map[string]any{
			"apiVersion": "monitoring.coreos.com/v1",
			"kind":       "PrometheusRule",
			"metadata": map[string]any{
				"name": "netdoctor", "namespace": ns,
				"labels": map[string]string{"app.kubernetes.io/name": "netdoctor"},
			},
			"spec": File{Groups: Groups(o)},
		}
	}
	if _, err := io.WriteString(w, Header); err != nil {
		return err
	}
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return enc.Close()
}

// IDs lists the finding IDs with an alert, sorted.
func IDs() []report.FindingID {
	var ids []report.FindingID
	for _, c := range rules.Classes() {
		if rules.Continuous(c.ID) {
			ids = append(ids, c.ID)
		}
	}
	return ids
}
