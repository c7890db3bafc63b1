package load

import "fmt"

// choose settles which engine runs: the one asked for, or for
// EngineAuto io_uring where this host allows it (probeUring), epoll
// otherwise, with the reason as a note.
//
// (auto was epoll for a while, on a measurement that had the io_uring
// client's receive window hold 512 KiB answers over a 50 ms round trip
// for 12-18 % of the server's send time, and epoll's none. Measured
// again, alternating engines on TestRunIdleRestart/Off, both show it, in
// the same range: io_uring 8, 13 and 17 %, epoll 11, 16 and 11 %. It is
// the receive buffer's autotuning growing behind a window the sender's
// CUBIC kept across the idle, which either client meets.)
func choose(asked Engine) (Engine, string, error) {
	switch asked {
	case EngineEpoll:
		return EngineEpoll, "", nil
	case EngineIOUring:
		if err := probeUring(); err != nil {
			return "", "", fmt.Errorf("%w: --engine io_uring: %v", ErrEngine, err)
		}
		return EngineIOUring, "", nil
	case EngineAuto, "":
		if err := probeUring(); err != nil {
			return EngineEpoll, fmt.Sprintf("io_uring unavailable, the epoll engine ran: %v", err), nil
		}
		return EngineIOUring, "", nil
	}
	_, err := ParseEngine(string(asked))
	return "", "", err
}

// newPoller makes thread w's I/O for the chosen engine. A ring this
// thread cannot set up (the memory it locks, a limit reached since the
// probe) falls back to epoll for EngineAuto, and says so.
func (e *engine) newPoller(w *worker) (poller, error) {
	if e.engine == EngineIOUring {
		p, err := newUringPoller(w)
		if err == nil {
			return p, nil
		}
		if e.opts.Engine == EngineIOUring {
			return nil, err
		}
		e.noteOnce(fmt.Sprintf("thread %d: io_uring: %v: the epoll engine ran it", w.id, err))
	}
	return newEpoller(w)
}

// noteOnce adds a note to the run's result (from any thread).
func (e *engine) noteOnce(n string) {
	e.notesMu.Lock()
	e.notes = append(e.notes, n)
	e.notesMu.Unlock()
}

// runThread runs event-loop thread id: http:// and https:// alike.
func (e *engine) runThread(id int) float64 { return e.runWorker(id) }
