package report

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
)

// WorkersText writes a merged result's workers (netdoctor merge): each
// one's share, what it sent and its own CPU, and which limited the
// load. Nothing for a single process's result.
func WorkersText(w io.Writer, r *load.Result) error {
	if len(r.Workers) == 0 {
		return nil
	}
	p := NewPrinter(w)
	first, last := r.Workers[0].Start, r.Workers[0].Start
	for _, wk := range r.Workers {
		first, last = minTime(first, wk.Start), maxTime(last, wk.Start)
	}
	p.F("Workers: %d, started within %s of each other\n", len(r.Workers), Dur(last.Sub(first)))
	p.F("  %-9s %10s %11s %9s %7s %7s  %s\n", "worker", "requests", "req/s", "rate", "sent", "CPU s", "threads on CPU")
	for _, wk := range r.Workers {
		rate, sent := "-", "-"
		if wk.Rate > 0 {
			rate, sent = fmt.Sprintf("%.0f", wk.Rate), fmt.Sprintf("%.0f%%", 100*wk.Sent)
		}
		busy := make([]string, len(wk.ThreadBusy))
		for i, b := range wk.ThreadBusy {
			busy[i] = fmt.Sprintf("%.2f", b)
		}
		mark := ""
		if wk.Saturated {
			mark = "  SATURATED"
		}
		p.F("  %-9s %10d %11.2f %9s %7s %7.2f  %s%s\n", wk.Segment, wk.Requests, wk.RPS, rate, sent, wk.CPUSeconds, strings.Join(busy, " "), mark)
	}
	return p.Err()
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
