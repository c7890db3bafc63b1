package load

import (
	"crypto/tls"
	"errors"
	"io"
	"iter"
	"net"
	"os"
	"syscall"
	"time"
)

// tlsConn is one connection's TLS, crypto/tls's record layer over bytes
// the event loop moves: what the socket delivered goes in with feed, the
// records to send come out of pending. Both engines share it, so HTTPS
// costs the same system calls as HTTP (none of its own: no goroutine per
// connection, no netpoller), and crypto/tls does the cryptography (kTLS
// would move it into the kernel, but this kernel is built without
// CONFIG_TLS, so it could not be measured to help; see bench/README.md).
//
// After the handshake, a Read that finds no complete record gets a
// temporary error from the transport, which crypto/tls does not keep as
// the connection's error: the loop simply reads again when more bytes
// came. The handshake keeps its errors, so it runs as a coroutine
// (iter.Pull) on the loop's own thread, suspended where it waits for the
// server's bytes and resumed when they came: no goroutine switch through
// the scheduler, no lock.
type tlsConn struct {
	conn *tls.Conn
	in   []byte // received; crypto/tls has read in[off:] not yet
	off  int
	// Records to send: out, or while a send of buf[sent] is in flight
	// (io_uring keeps reading it until its completion), the other
	// buffer.
	buf  [2][]byte
	cur  int
	hs   func() (struct{}, bool) // the handshake coroutine, nil once ended
	stop func()
	// yield suspends the handshake until feed resumes it; nil outside the
	// handshake.
	yield  func(struct{}) bool
	hsErr  error
	closed bool
}

// errWouldBlock is the transport's "no bytes yet": temporary, so
// crypto/tls returns it without failing the connection.
type wouldBlock struct{}

func (wouldBlock) Error() string   { return "tls: no complete record yet" }
func (wouldBlock) Timeout() bool   { return true }
func (wouldBlock) Temporary() bool { return true }

var errWouldBlock net.Error = wouldBlock{}

func newTLSConn(cfg *tls.Config) *tlsConn {
	t := &tlsConn{}
	t.conn = tls.Client((*tlsTransport)(t), cfg)
	return t
}

// handshake starts the handshake; it runs until it needs the server's
// bytes. done reports a handshake that ended (err says how).
func (t *tlsConn) handshake() (done bool, err error) {
	t.hs, t.stop = iter.Pull(func(yield func(struct{}) bool) {
		t.yield = yield
		t.hsErr = t.conn.Handshake()
		t.yield = nil
	})
	return t.resume()
}

func (t *tlsConn) resume() (bool, error) {
	if _, more := t.hs(); more {
		return false, nil
	}
	t.hs, t.stop = nil, nil
	return true, t.hsErr
}

// feed hands the handshake, or the records after it, what the socket
// delivered. During the handshake it returns whether it ended and how;
// after it, the bytes wait for read.
func (t *tlsConn) feed(b []byte) (done bool, err error) {
	if t.off == len(t.in) { // all read: start the buffer over
		t.in, t.off = t.in[:0], 0
	}
	t.in = append(t.in, b...)
	if t.hs == nil {
		return true, nil
	}
	return t.resume()
}

// read returns the next plaintext; 0 and nil when no complete record is
// buffered; io.EOF after the server's close_notify.
func (t *tlsConn) read(p []byte) (int, error) {
	n, err := t.conn.Read(p)
	if errors.Is(err, errWouldBlock) {
		err = nil
	}
	return n, err
}

// write encrypts p into the pending records.
func (t *tlsConn) write(p []byte) error {
	_, err := t.conn.Write(p)
	return err
}

// pending returns the records to send and starts a new buffer for the
// next ones; the one returned stays untouched until the pending after
// next, by which time its send has completed.
func (t *tlsConn) pending() []byte {
	b := t.buf[t.cur]
	if len(b) == 0 {
		return nil
	}
	t.cur ^= 1
	t.buf[t.cur] = t.buf[t.cur][:0]
	return b
}

// close ends a handshake still suspended; the connection is not used
// again.
func (t *tlsConn) close() {
	t.closed = true
	if t.stop != nil {
		t.stop()
		t.hs, t.stop = nil, nil
	}
}

// tlsTransport is the net.Conn crypto/tls reads and writes: memory.
type tlsTransport tlsConn

func (m *tlsTransport) Read(p []byte) (int, error) {
	t := (*tlsConn)(m)
	for t.off == len(t.in) {
		if t.closed {
			return 0, net.ErrClosed
		}
		if t.yield == nil {
			return 0, errWouldBlock
		}
		if !t.yield(struct{}{}) { // the handshake waits for feed
			return 0, net.ErrClosed
		}
	}
	n := copy(p, t.in[t.off:])
	t.off += n
	return n, nil
}

func (m *tlsTransport) Write(p []byte) (int, error) {
	t := (*tlsConn)(m)
	if t.closed {
		return 0, net.ErrClosed
	}
	t.buf[t.cur] = append(t.buf[t.cur], p...)
	return len(p), nil
}

func (m *tlsTransport) Close() error                     { return nil }
func (m *tlsTransport) LocalAddr() net.Addr              { return tlsAddr{} }
func (m *tlsTransport) RemoteAddr() net.Addr             { return tlsAddr{} }
func (m *tlsTransport) SetDeadline(time.Time) error      { return nil }
func (m *tlsTransport) SetReadDeadline(time.Time) error  { return nil }
func (m *tlsTransport) SetWriteDeadline(time.Time) error { return nil }

type tlsAddr struct{}

func (tlsAddr) Network() string { return "tcp" }
func (tlsAddr) String() string  { return "event-loop" }

var _ io.ReadWriter = (*tlsTransport)(nil)

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
