//go:build !linux

package load

import "fmt"

// choose: without epoll or io_uring, goroutines run every connection.
func choose(asked Engine) (Engine, string, error) {
	switch asked {
	case EngineAuto, "":
		return EngineGoroutines, "", nil
	case EngineEpoll, EngineIOUring:
		return "", "", fmt.Errorf("%w: --engine %s needs Linux", ErrEngine, asked)
	}
	_, err := ParseEngine(string(asked))
	return "", "", err
}

func (e *engine) noteOnce(n string) {
	e.notesMu.Lock()
	e.notes = append(e.notes, n)
	e.notesMu.Unlock()
}

// runThread runs thread id's connections as goroutines.
func (e *engine) runThread(id int) float64 {
	if e.t.scheme == "https" {
		return e.runTLS(id)
	}
	return e.runWorker(id)
}
