package capacity

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/report"
)

// Defaults of an SLO: the latency objective when none is given, and the
// failed requests' share.
const (
	DefaultObjective     = "p99<=500ms"
	DefaultMaxErrorShare = 0.001
)

// ParseSLO reads --slo's values: latency objectives "pNN<=DURATION"
// ("p99<=100ms", "p99.9<=1s"; "<" reads as "<="), and at most one
// "errors<=N%" for the share of requests that may fail (default 0.1 %).
// Without a latency objective, DefaultObjective holds.
func ParseSLO(specs []string) (report.SLO, error) {
	slo := report.SLO{MaxErrorShare: DefaultMaxErrorShare}
	errorsSet := false
	for _, spec := range specs {
		for _, one := range strings.Split(spec, ",") {
			one = strings.ToLower(strings.Join(strings.Fields(one), ""))
			if one == "" {
				continue
			}
			name, value, ok := cut(one)
			if !ok {
				return report.SLO{}, fmt.Errorf("--slo %q: want pNN<=DURATION (p99<=100ms) or errors<=N%% (errors<=1%%)", one)
			}
			if name == "errors" {
				if errorsSet {
					return report.SLO{}, fmt.Errorf("--slo %q: errors given twice", one)
				}
				v, err := strconv.ParseFloat(strings.TrimSuffix(value, "%"), 64)
				if !strings.HasSuffix(value, "%") || err != nil || v < 0 || v >= 100 || math.IsNaN(v) {
					return report.SLO{}, fmt.Errorf("--slo %q: errors want a percentage from 0 up to 100, e.g. errors<=0.1%%", one)
				}
				slo.MaxErrorShare, errorsSet = v/100, true
				continue
			}
			o, err := objective(name, value)
			if err != nil {
				return report.SLO{}, fmt.Errorf("--slo %q: %w", one, err)
			}
			if slices.ContainsFunc(slo.Objectives, func(x report.Objective) bool { return x.Percentile == o.Percentile }) {
				return report.SLO{}, fmt.Errorf("--slo %q: %s given twice", one, o.Name())
			}
			slo.Objectives = append(slo.Objectives, o)
		}
	}
	if len(slo.Objectives) == 0 {
		o, _ := objective("p99", "500ms")
		slo.Objectives = []report.Objective{o}
	}
	slices.SortFunc(slo.Objectives, func(a, b report.Objective) int {
		switch {
		case a.Percentile < b.Percentile:
			return -1
		case a.Percentile > b.Percentile:
			return 1
		}
		return 0
	})
	slo.Text = sloText(slo)
	return slo, nil
}

// cut splits "name<=value" or "name<value".
func cut(s string) (name, value string, ok bool) {
	if n, v, ok := strings.Cut(s, "<="); ok {
		return n, v, n != "" && v != ""
	}
	if n, v, ok := strings.Cut(s, "<"); ok {
		return n, v, n != "" && v != ""
	}
	return "", "", false
}

// objective reads "p99" and "100ms".
func objective(name, value string) (report.Objective, error) {
	ps, ok := strings.CutPrefix(name, "p")
	p, err := strconv.ParseFloat(ps, 64)
	if !ok || err != nil || p <= 0 || p > 100 || math.IsNaN(p) {
		return report.Objective{}, fmt.Errorf("%q is not a percentile: write p50, p99, p99.9 (p100 is the slowest request)", name)
	}
	d, err := time.ParseDuration(value)
	if err != nil {
		return report.Objective{}, fmt.Errorf("%q is not a duration: write e.g. 100ms, 1.5s", value)
	}
	if d < time.Millisecond || d > time.Hour {
		return report.Objective{}, fmt.Errorf("bound %v: from 1ms to 1h", d)
	}
	return report.Objective{Percentile: p, Bound: d}, nil
}

// sloText is the SLO as --slo writes it: "p99<=500ms, errors<=0.1%".
func sloText(s report.SLO) string {
	var parts []string
	for _, o := range s.Objectives {
		parts = append(parts, o.String())
	}
	return strings.Join(parts, ", ") + ", errors<=" + strconv.FormatFloat(100*s.MaxErrorShare, 'f', -1, 64) + "%"
}

// maxBound is the SLO's longest latency bound.
func maxBound(s report.SLO) time.Duration {
	var b time.Duration
	for _, o := range s.Objectives {
		b = max(b, o.Bound)
	}
	return b
}

// minBound is the SLO's shortest latency bound.
func minBound(s report.SLO) time.Duration {
	b := time.Duration(math.MaxInt64)
	for _, o := range s.Objectives {
		b = min(b, o.Bound)
	}
	return b
}
