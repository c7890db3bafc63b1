//go:build !linux

package load

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"sync"
	"time"
	"unsafe"
)

// runTLS drives this thread's share of HTTPS connections, one goroutine
// each over crypto/tls: TLS needs a blocking connection, and at TLS's own
// cost per request the goroutine scheduling is noise. Certificates are
// not verified, as with wrk: the target is the system under test, not a
// party to trust. It returns the share of the run the process spent on
// CPU divided among the threads, since goroutines have no thread of
// their own to measure.
func (e *engine) runTLS(id int) float64 {
	cfg := &tls.Config{ServerName: e.t.hostname, InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}
	return e.runGoroutines(id, func(ctx context.Context, addr string) (net.Conn, error) {
		d := tls.Dialer{Config: cfg}
		return d.DialContext(ctx, "tcp", addr)
	})
}

// dialFunc opens one connection to addr.
type dialFunc func(ctx context.Context, addr string) (net.Conn, error)

// runGoroutines runs this thread's share of connections as goroutines.
func (e *engine) runGoroutines(id int, dial dialFunc) float64 {
	n := e.opts.Threads
	slots := (e.opts.Connections - id + n - 1) / n
	st := e.threads[id]
	var lt *luaThread
	if e.script != nil {
		lt = e.script.threads[id]
	}
	// The thread's connections share its Lua state and take turns in
	// it: a Lua state is not safe for concurrent use.
	var ltMu sync.Mutex
	cpu0 := processCPU()
	var wg sync.WaitGroup
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g := newGoConn(e, st, lt, &ltMu, i*n+id, dial)
			defer g.close()
			g.loop()
		}()
	}
	wg.Wait()
	if s := time.Since(e.start).Seconds(); s > 0 {
		return (processCPU() - cpu0) / s / float64(n)
	}
	return 0
}

// goConn is one connection slot run by a goroutine. With a script, the
// slots of one thread share its Lua state, as an event loop's
// connections do, and take turns in it (luaThread.mu).
type goConn struct {
	e     *engine
	st    *threadStats
	lt    *luaThread  // nil without a script
	ltMu  *sync.Mutex // serialises the thread's calls into lt
	slot  int
	dial  dialFunc
	addr  string
	p     *respParser
	buf   []byte
	c     net.Conn
	req   []byte        // the thread's request when request() is not defined
	start time.Duration // the current request's latency origin
}

func newGoConn(e *engine, st *threadStats, lt *luaThread, ltMu *sync.Mutex, slot int, dial dialFunc) *goConn {
	g := &goConn{e: e, st: st, lt: lt, ltMu: ltMu, slot: slot, dial: dial, p: newRespParser(),
		buf: make([]byte, 32<<10), req: e.req, addr: net.JoinHostPort(e.addr.String(), e.t.port)}
	if lt != nil {
		g.req = lt.static
		if lt.addr != nil { // setup's thread.addr
			g.addr = lt.addr.String()
		}
		g.p.capt = lt.newCaptured() // nil unless response() reads them
	}
	return g
}

func (g *goConn) close() {
	if g.c != nil {
		g.c.Close()
		g.st.open.Add(-1)
		g.c = nil
	}
}

// running says whether the slot goes on: the run has not ended and the
// script has not stopped this thread.
func (g *goConn) running() bool {
	return !g.e.stop.Load() && (g.lt == nil || !g.lt.stopped.Load())
}

// loop waits for the ramp to reach the slot, then sends requests until
// the engine stops.
func (g *goConn) loop() {
	e := g.e
	interval := time.Duration(0)
	if e.opts.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(e.opts.Connections) / e.opts.Rate)
	}
	next := interval * time.Duration(g.slot) / time.Duration(max(e.opts.Connections, 1))
	delayed := false // delay() was served for the next request
	for g.running() {
		now := time.Since(e.start)
		if g.slot >= e.targetConns(now) {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		origin := now
		if interval > 0 {
			if wait := next - now; wait > 0 {
				time.Sleep(min(wait, 10*time.Millisecond))
				continue
			}
			origin = next
			next += interval
			if now-origin > interval {
				// Due while this connection was still busy: it
				// waited in the generator (Result.Queued).
				g.st.waited(1)
			}
		} else if g.lt != nil && g.lt.delay != nil && !delayed {
			if !g.delay() {
				return
			}
			delayed = true
			continue
		}
		if !e.take() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		delayed = false
		g.start = origin
		if !g.connect() {
			continue
		}
		keep, class, cause := g.roundTrip()
		e.settle()
		if class != stNone {
			at := time.Since(e.start)
			g.st.fail(class, cause, at-g.start, at)
		}
		if !keep || class != stNone || e.opts.NoKeepAlive {
			g.close()
		}
	}
}

// connect opens the slot's connection if it has none. A failure is the
// reserved request's connect error.
func (g *goConn) connect() bool {
	if g.c != nil {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), g.e.opts.Timeout)
	c, err := g.dial(ctx, g.addr)
	cancel()
	if err != nil {
		at := time.Since(g.e.start)
		g.st.fail(errConn, tlsCause(err), at-g.start, at)
		g.e.settle()
		time.Sleep(10 * time.Millisecond)
		return false
	}
	g.c = c
	g.st.connected()
	return true
}

// delay runs the script's delay() and sleeps what it asks, or until the
// run stops. It returns false if the script failed.
func (g *goConn) delay() bool {
	g.ltMu.Lock()
	d, err := g.lt.callDelay()
	g.ltMu.Unlock()
	if err != nil {
		g.e.fail(err)
		return false
	}
	for end := time.Now().Add(d); g.running(); {
		left := time.Until(end)
		if left <= 0 {
			break
		}
		time.Sleep(min(left, 10*time.Millisecond))
	}
	return true
}

// request returns what to write next: request()'s result, or the
// thread's request.
func (g *goConn) request() ([]byte, error) {
	if g.lt == nil || g.lt.request == nil {
		return g.req, nil
	}
	g.ltMu.Lock()
	s, err := g.lt.call(g.lt.request)
	g.ltMu.Unlock()
	// The string's bytes are written as they are, without a copy.
	return unsafe.Slice(unsafe.StringData(s), len(s)), err
}

// response hands a complete response to the script's response().
func (g *goConn) response() error {
	if g.lt == nil || g.lt.response == nil {
		return nil
	}
	g.ltMu.Lock()
	defer g.ltMu.Unlock()
	return g.lt.callResponse(g.p.status(), g.p.capt)
}

// scriptFailed stops the run for a script error: the connection is
// dropped and not counted as a failed request.
func (g *goConn) scriptFailed(err error) (bool, int, string) {
	g.e.fail(err)
	return false, stNone, ""
}

// roundTrip sends one request (a script's pipeline: several) and reads
// its responses. It returns whether the connection may carry another,
// or the error class and cause.
func (g *goConn) roundTrip() (keep bool, class int, cause string) {
	req, err := g.request()
	if err != nil {
		return g.scriptFailed(err)
	}
	head := bytes.HasPrefix(req, []byte("HEAD "))
	g.c.SetDeadline(time.Now().Add(g.e.opts.Timeout))
	if _, err := g.c.Write(req); err != nil {
		if isTimeout(err) {
			return false, errTime, "timeout"
		}
		return false, errWrite, tlsCause(err)
	}
	g.p.reset(head)
	pending := g.e.unit
	var read uint64
	for {
		n, err := g.c.Read(g.buf)
		for b := g.buf[:n]; len(b) > 0; {
			used, done, perr := g.p.feed(b)
			read += uint64(used)
			if perr != nil {
				return false, errRead, "malformed"
			}
			if !done {
				break
			}
			b = b[used:]
			if pending > 1 { // a pipeline: its last response's latency alone is recorded
				g.st.count(g.p.status(), read)
				if err := g.response(); err != nil {
					return g.scriptFailed(err)
				}
				pending, read = pending-1, 0
				g.p.reset(head)
				continue
			}
			return g.finish(read, len(b) == 0)
		}
		if err != nil {
			if isTimeout(err) {
				return false, errTime, "timeout"
			}
			if errors.Is(err, io.EOF) {
				if done, perr := g.p.eof(); done && perr == nil && pending == 1 {
					g.finish(read, false)
					return false, stNone, ""
				}
				return false, errRead, "closed"
			}
			return false, errRead, tlsCause(err)
		}
	}
}

// finish records the last response of a request and hands it to the
// script; clean says no bytes followed it.
func (g *goConn) finish(read uint64, clean bool) (bool, int, string) {
	at := time.Since(g.e.start)
	g.st.record(at-g.start, at, g.p.status(), read)
	if err := g.response(); err != nil {
		return g.scriptFailed(err)
	}
	return g.p.keepAlive() && clean, stNone, ""
}
