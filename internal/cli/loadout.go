package cli

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"
)

// progress prints a live line each second when stderr is a terminal and
// nothing otherwise.
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	total time.Duration
	shown bool
}

func newProgress(w io.Writer, total time.Duration, timed bool) *progress {
	p := &progress{w: w}
	if f, ok := w.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeCharDevice != 0 {
			p.tty = true
		}
	}
	if timed {
		p.total = total
	}
	return p
}

func (p *progress) second(s load.Second) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := time.Duration(s.Index+1) * time.Second
	of := ""
	if p.total > 0 {
		of = "/" + p.total.String()
	}
	rps := float64(s.Requests) / s.Length.Seconds()
	fmt.Fprintf(p.w, "\r\033[K[%s%s] %.0f req/s  p50 %s  p99 %s  errors %d  conns %d",
		elapsed, of, rps, report.Dur(s.P50), report.Dur(s.P99), s.Errors.Total(), s.OpenConns)
	p.shown = true
}

// done clears the progress line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}

// printer writes formatted text and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) f(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
