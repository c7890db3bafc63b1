package cli

import (
	"cmp"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/netdoctor/netdoctor/internal/load"
	"github.com/netdoctor/netdoctor/internal/report"

	"github.com/netdoctor/netdoctor/internal/printable"
)

// progress keeps one live line on a terminal, rewritten each second:
// the load's second (requests per second, p50, p99, errors, open
// connections), or how far a timed step (run's baseline and tail,
// check's window, collect) has come. It writes nothing at all when its
// writer is not a terminal: a pipe, a file, /dev/null. The elapsed time
// it shows never passes the stated duration: past it, the line says
// "finishing" (the load drains, the last snapshot is taken).
type progress struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	total time.Duration // the load's duration; 0 when it is bounded by -n alone
	shown bool
	stop  chan struct{} // closed to end the running step's ticker; nil when none runs
}

// newProgress returns the progress of a load of total length, known when
// timed (a run bounded only by -n is not).
func newProgress(w io.Writer, total time.Duration, timed bool) *progress {
	// Its own control sequences ("\r\033[K") go to the terminal
	// itself: its words are netdoctor's.
	w = printable.Raw(w)
	p := &progress{w: w, tty: isTerminal(w)}
	if timed {
		p.total = total
	}
	return p
}

// startPhase shows the progress of one timed step of d on w until done.
func startPhase(w io.Writer, name string, d time.Duration) *progress {
	p := newProgress(w, 0, false)
	p.phase(name, d)
	return p
}

// second shows one second of the load's timeline.
func (p *progress) second(s load.Second) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endPhase()
	elapsed := time.Duration(s.Index)*time.Second + s.Length
	rps := 0.0
	if s.Length > 0 {
		rps = float64(s.Requests) / s.Length.Seconds()
	}
	p.line("[%s] %.0f req/s  p50 %s  p99 %s  errors %d  conns %d%s", p.clock(elapsed, p.total), rps,
		report.Dur(s.P50), report.Dur(s.P99), s.Errors.Total(), s.OpenConns, p.finishing(elapsed, p.total))
}

// phase starts showing a timed step of d: "[2s/3s] baseline", counted
// each second from now, until the next step, second or done. The load
// step shows nothing of its own: its seconds do.
func (p *progress) phase(name string, d time.Duration) {
	if !p.tty {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endPhase()
	p.clear()
	if name == "load" {
		return
	}
	stop := make(chan struct{})
	p.stop = stop
	start := time.Now()
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-t.C:
				p.mu.Lock()
				select {
				case <-stop: // ended while this tick waited for the lock
				default:
					el := now.Sub(start)
					p.line("[%s] %s%s", p.clock(el, d), cmp.Or(phaseText[name], name), p.finishing(el, d))
				}
				p.mu.Unlock()
			}
		}
	}()
}

// phaseText says what run's steps are about.
var phaseText = map[string]string{
	"baseline": "baseline: sampling before the load",
	"path":     "path: probing the path through the agent's test endpoint",
	"tail":     "tail: sampling after the load",
}

// done ends the running step and clears the line.
func (p *progress) done() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endPhase()
	p.clear()
}

// clock is "3s/10s": elapsed, at most total, of total; or only elapsed
// when total is unknown.
func (p *progress) clock(elapsed, total time.Duration) string {
	if total <= 0 {
		return shortDur(elapsed)
	}
	return shortDur(min(elapsed, total)) + "/" + shortDur(total)
}

// finishing marks the time past the step's end.
func (p *progress) finishing(elapsed, total time.Duration) string {
	if total > 0 && elapsed >= total {
		return "  finishing"
	}
	return ""
}

// shortDur writes a duration to a tenth of a second: "3s", "2.5s", "1m30s".
func shortDur(d time.Duration) string {
	return d.Round(100 * time.Millisecond).String()
}

// endPhase stops the running step's ticker; p.mu is held.
func (p *progress) endPhase() {
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
}

// line rewrites the live line; p.mu is held.
func (p *progress) line(format string, args ...any) {
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
	p.shown = true
}

// clear erases the live line; p.mu is held.
func (p *progress) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
		p.shown = false
	}
}
