package load

import "fmt"

// choose settles which engine runs: the one asked for; for EngineAuto,
// epoll (io_uring is asked for by name, and refused with the reason
// where this host does not allow it).
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
		// epoll until io_uring's receive keeps up with large answers:
		// a server sending 512 KiB answers over a 50 ms round trip
		// spent 12-18 % of its send time held by the io_uring
		// client's receive window (TestRunIdleRestart/Off), which is
		// netdoctor's load limiting the server; epoll's none.
		return EngineEpoll, "", nil
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
