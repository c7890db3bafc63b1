package load

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
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
	cpu0 := processCPU()
	var wg sync.WaitGroup
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.goConn(st, i*n+id, dial)
		}()
	}
	wg.Wait()
	if s := time.Since(e.start).Seconds(); s > 0 {
		return (processCPU() - cpu0) / s / float64(n)
	}
	return 0
}

// goConn is one connection slot: it waits for the ramp to reach it,
// then sends requests until the engine stops.
func (e *engine) goConn(st *threadStats, slot int, dial dialFunc) {
	addr := net.JoinHostPort(e.addr.String(), e.t.port)
	p := newRespParser()
	buf := make([]byte, 32<<10)
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
			st.open.Add(-1)
		}
	}()
	interval := time.Duration(0)
	if e.opts.Rate > 0 {
		interval = time.Duration(float64(time.Second) * float64(e.opts.Connections) / e.opts.Rate)
	}
	next := interval * time.Duration(slot) / time.Duration(max(e.opts.Connections, 1))
	for !e.stop.Load() {
		now := time.Since(e.start)
		if slot >= e.targetConns(now) {
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
		}
		if !e.take() {
			time.Sleep(10 * time.Millisecond)
			continue
		}
		if c == nil {
			var err error
			ctx, cancel := context.WithTimeout(context.Background(), e.opts.Timeout)
			c, err = dial(ctx, addr)
			cancel()
			if err != nil {
				st.fail(errConn, tlsCause(err))
				e.settle()
				time.Sleep(10 * time.Millisecond)
				continue
			}
			st.connected()
		}
		keep, class, cause := e.roundTrip(c, p, buf, st, origin)
		e.settle()
		if class != stNone {
			st.fail(class, cause)
		}
		if !keep || class != stNone || e.opts.NoKeepAlive {
			c.Close()
			st.open.Add(-1)
			c = nil
		}
	}
}

// roundTrip sends one request and reads its response. It returns whether
// the connection may carry another, or the error class and cause.
func (e *engine) roundTrip(c net.Conn, p *respParser, buf []byte, st *threadStats, origin time.Duration) (keep bool, class int, cause string) {
	c.SetDeadline(time.Now().Add(e.opts.Timeout))
	if _, err := c.Write(e.req); err != nil {
		if isTimeout(err) {
			return false, errTime, "timeout"
		}
		return false, errWrite, tlsCause(err)
	}
	p.reset(e.head)
	var read uint64
	for {
		n, err := c.Read(buf)
		if n > 0 {
			used, done, perr := p.feed(buf[:n])
			read += uint64(used)
			if perr != nil {
				return false, errRead, "malformed"
			}
			if done {
				st.record(time.Since(e.start)-origin, p.status(), read)
				return p.keepAlive() && used == n, stNone, ""
			}
		}
		if err != nil {
			if isTimeout(err) {
				return false, errTime, "timeout"
			}
			if errors.Is(err, io.EOF) {
				if done, perr := p.eof(); done && perr == nil {
					st.record(time.Since(e.start)-origin, p.status(), read)
					return false, stNone, ""
				}
				return false, errRead, "closed"
			}
			return false, errRead, tlsCause(err)
		}
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, os.ErrDeadlineExceeded)
}

func tlsCause(err error) string {
	var se syscall.Errno
	if errors.As(err, &se) {
		return connectCause(se)
	}
	if isTimeout(err) {
		return "timeout"
	}
	var he tls.RecordHeaderError
	if errors.As(err, &he) {
		return "tls-handshake"
	}
	return err.Error()
}
