package rules

import (
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// baseline compares each counter behind an active finding with its rate
// in the quiet seconds before the load. A counter that rose as fast
// without load is background, not the load's doing: the finding keeps its
// evidence and says so (Finding.Background), and a critical one becomes
// a warning.
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
		// A listener that counts its own drops is judged by them: the
		// namespace's counters are every listener's, and a busy
		// neighbour's drops before the load are not this one's.
		own, byOwn := ownDropRates(b, bw, lw, f)
		if byOwn {
			counted, background = true, own.before > 0 && own.before >= 0.5*own.load
		}
		for _, e := range f.Evidence {
			if byOwn {
				break
			}
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
		f.Background = &report.Background{Seconds: bw.Duration().Seconds(), LoadFailed: connFailed(lr) && ClassOf(f.ID).Drops}
		if !f.Background.LoadFailed && f.Severity == report.Critical {
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

// dropRates are one listener's own drops a second, before the load and
// during it.
type dropRates struct{ before, load float64 }

// ownDropRates are the own drop rates of the listener a finding is
// about when its class rests on a listener's own drops (ListenerDrops),
// the bundle's listeners count theirs, and that one dropped during the
// load.
func ownDropRates(b *evidence.Bundle, bw, lw evidence.Window, f *report.Finding) (dropRates, bool) {
	if !ClassOf(f.ID).ListenerDrops || f.About.Listen == "" || !perListenerDrops(b) {
		return dropRates{}, false
	}
	rate := func(w evidence.Window) float64 {
		secs := w.Duration().Seconds()
		if secs <= 0 {
			return 0
		}
		first, last := dropsAt(w.First, f.About.Listen), dropsAt(w.Last, f.About.Listen)
		return float64(last-min(first, last)) / secs
	}
	r := dropRates{before: rate(bw), load: rate(lw)}
	return r, r.load > 0
}

// dropsAt sums the own drop counters of the listeners on addr (IPv4
// and IPv6 sockets of one port) in a snapshot.
func dropsAt(s *evidence.Snapshot, addr string) uint64 {
	var n uint64
	if s == nil || s.Sockets == nil {
		return 0
	}
	for _, l := range s.Sockets.Listeners {
		if l.Addr == addr {
			n += l.Drops
		}
	}
	return n
}
