package rules

import (
	"fmt"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// baseline compares each counter behind an active finding with its rate
// in the quiet seconds before the load. A counter that rose as fast
// without load is background, not the load's doing: the finding keeps the
// evidence but says so, and a critical one becomes a warning.
//
// Unless the load failed with it: drops that a flood or another client
// keeps going (seed 001 §6) are not the load's doing either, but when the
// load's own connections fail in numbers they hurt it all the same.
func baseline(fs []report.Finding, b *evidence.Bundle, start time.Time, side report.Side, lr *load.Result) {
	if b == nil {
		return
	}
	bw, ok := b.Until(start).Window()
	if !ok {
		return
	}
	lw, ok := b.From(start).Window()
	if !ok {
		return
	}
	for i := range fs {
		f := &fs[i]
		if f.Status != report.Active || f.Side != side {
			continue
		}
		background := true
		counted := false
		for _, e := range f.Evidence {
			if !e.Window || !isCounter(e.Source) {
				continue
			}
			counted = true
			br, lr := bw.SourceRate(e.Source), lw.SourceRate(e.Source)
			if br == 0 || br < 0.5*lr {
				background = false
			}
		}
		if !counted || !background {
			continue
		}
		if connFailed(lr) && ClassOf(f.ID).Drops {
			f.Evidence = append(f.Evidence, report.Item{
				Text:   fmt.Sprintf("these counters rose as fast in the %.0f s before the load: something besides the load drives them, and the load's connections failed with them", bw.Duration().Seconds()),
				Source: "baseline", Window: true,
			})
			continue
		}
		f.Evidence = append(f.Evidence, report.Item{
			Text:   fmt.Sprintf("these counters rose as fast in the %.0f s before the load: background, not caused by it", bw.Duration().Seconds()),
			Source: "baseline", Window: true,
		})
		if f.Severity == report.Critical {
			f.Severity = report.Warning
		}
	}
}

// connFailed reports a load whose connects failed or timed out for at
// least a tenth of its attempts.
func connFailed(lr *load.Result) bool {
	if lr == nil {
		return false
	}
	bad := lr.Errors.Connect + lr.Errors.Timeout
	return bad > 0 && bad*10 >= lr.Requests+lr.Errors.Total()
}

// isCounter reports evidence sources that are counters with a rate.
func isCounter(src string) bool {
	return strings.HasPrefix(src, "Tcp") || strings.HasPrefix(src, "Udp") || strings.HasPrefix(src, "Ip") ||
		strings.HasPrefix(src, "conntrack.")
}
