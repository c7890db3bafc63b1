package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/alerts"
)

// runRules prints netdoctor's Prometheus alerting rules: one alert per
// finding the agent's diagnosis can make (docs/metrics.md).
func runRules(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rules", stderr)
	var o alerts.Options
	format := fs.String("format", "prometheus", "prometheus: a rule file for rule_files; prometheusrule: a prometheus-operator PrometheusRule")
	ns := fs.String("namespace", "netdoctor", "the PrometheusRule's namespace (--format prometheusrule)")
	fs.Var(durationFlag{&o.For}, "for", "hold every alert this long instead of its own duration (e.g. 10s to see them at once; tests)")
	fs.StringVar(&o.Runbook, "runbook", alerts.DefaultRunbook, "URL of docs/findings.md: each alert links its finding's section")
	pos, err := parse(fs, args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return badInput("rules takes no arguments, got %q", strings.Join(pos, " "))
	}
	if *format != "prometheus" && *format != "prometheusrule" {
		return badInput("rules --format %q: want prometheus or prometheusrule", *format)
	}
	if o.For < 0 || o.For != 0 && o.For < time.Second {
		return badInput("rules --for %v: want at least 1s", o.For)
	}
	if u, err := url.Parse(o.Runbook); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return badInput("rules --runbook %q: want an http(s) URL without a #fragment", o.Runbook)
	}
	if *format == "prometheusrule" && !dnsLabel(*ns) {
		return badInput("rules --namespace %q: want a Kubernetes namespace name (lower-case letters, digits, '-')", *ns)
	}
	if err := alerts.Write(stdout, o, *format == "prometheusrule", *ns); err != nil {
		return fmt.Errorf("rules: %w", err)
	}
	return nil
}

// dnsLabel reports whether s is an RFC 1123 label, as Kubernetes names
// namespaces.
func dnsLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}
