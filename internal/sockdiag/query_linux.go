package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"

	"github.com/netdoctor/netdoctor/internal/evidence/kernel"
)

// Querier asks the kernel about given TCP connections, one exact lookup
// each: the cost grows with the connections asked about, not with the
// namespace's socket table, so a few of them can be sampled many times a
// second on a host with 100k sockets.
type Querier struct {
	c   *conn
	buf []byte
}

// queryBatch is how many lookups go in one send: each answer is a
// datagram of its own, and they must all fit in the socket's receive
// buffer.
const queryBatch = 64

// infoExt asks for INET_DIAG_INFO (struct tcp_info).
const infoExt = uint8(1 << (inetDiagInfo - 1))

// NewQuerier opens a sock_diag socket in the calling thread's network
// namespace (lock the thread into another one to query there). Callers
// must Close it.
func NewQuerier() (*Querier, error) {
	c, err := open()
	if err != nil {
		return nil, err
	}
	return &Querier{c: c, buf: make([]byte, recvBufLen)}, nil
}

// Close releases the socket.
func (q *Querier) Close() { q.c.close() }

// Query looks up each connection and calls fn with its index in ids, its
// inet_diag_msg and tcp_info. Connections that no longer exist are
// skipped. It must not be called concurrently.
func (q *Querier) Query(ids []SockID, fn func(i int, m *InetDiagMsg, t *TCPInfo)) error {
	for start := 0; start < len(ids); start += queryBatch {
		end := min(start+queryBatch, len(ids))
		if err := q.batch(ids[start:end], start, fn); err != nil {
			return err
		}
	}
	return nil
}

func (q *Querier) batch(ids []SockID, base int, fn func(i int, m *InetDiagMsg, t *TCPInfo)) error {
	var m InetDiagMsg
	var t TCPInfo
	return q.lookups(len(ids), base, 56, func(i int, b []byte) {
		copy(b, exactRequest(ids[i], infoExt))
	}, func(i int, payload []byte) {
		if ok, _ := DecodeInetDiagInfo(payload, &m, &t); ok {
			fn(i, &m, &t)
		}
	})
}

// lookups sends n exact lookups of reqLen bytes each in one datagram,
// fill writing the i-th request's body, and calls got with the payload
// of each socket found (its index plus base). The sequence numbers tell
// the answers apart: each is the request's index plus one.
func (q *Querier) lookups(n, base, reqLen int, fill func(i int, b []byte), got func(i int, payload []byte)) error {
	msgLen := nlmsgHdrLen + reqLen
	msg := make([]byte, msgLen*n)
	for i := range n {
		b := msg[i*msgLen:]
		binary.NativeEndian.PutUint32(b, uint32(msgLen))
		binary.NativeEndian.PutUint16(b[4:], sockDiagByFamily)
		binary.NativeEndian.PutUint16(b[6:], nlmFRequest)
		binary.NativeEndian.PutUint32(b[8:], uint32(base+i+1))
		fill(i, b[nlmsgHdrLen:msgLen])
	}
	if err := unix.Sendto(q.c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("send sock_diag lookups: %w", err)
	}
	for left := n; left > 0; {
		r, _, err := unix.Recvfrom(q.c.fd, q.buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("read sock_diag lookups: %w", err)
		}
		left -= eachReply(q.buf[:r], func(seq uint32, payload []byte) {
			i := int(seq) - 1
			if i < base || i >= base+n {
				return
			}
			got(i, payload)
		})
	}
	return nil
}

// QueryUnix looks up each unix socket by its inode and cookie
// (unix_diag_get_exact) and calls fn with its index in ids and its
// unix_diag_msg with its name, its peer and its queue lengths. Sockets
// that no longer exist are skipped. The kernel finds a socket by walking
// the namespace's unix socket table (unix_lookup_by_ino: no index by
// inode), so a lookup costs a few ns per unix socket of the namespace: fine
// for the few connections a trace follows, each looked up every 100 ms.
// It must not be called concurrently.
func (q *Querier) QueryUnix(ids []UnixID, fn func(i int, m *UnixDiagMsg)) error {
	var m UnixDiagMsg
	for start := 0; start < len(ids); start += queryBatch {
		part := ids[start:min(start+queryBatch, len(ids))]
		err := q.lookups(len(part), start, unixDiagReqLen, func(i int, b []byte) {
			copy(b, unixExactRequest(part[i]))
		}, func(i int, payload []byte) {
			if DecodeUnixDiagMsg(payload, &m) == nil {
				fn(i, &m)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// Listener finds the listener that a connection to addr would reach in
// the querier's namespace (one bound to addr or to the wildcard), by an
// exact lookup from no remote address: the kernel's own listener lookup,
// whatever the size of the socket table. ok is false when none listens.
func (q *Querier) Listener(addr netip.AddrPort) (l kernel.Listener, ok bool, err error) {
	err = q.batch([]SockID{{Local: addr, Remote: netip.AddrPortFrom(unspecified(addr.Addr()), 0)}}, 0, func(_ int, m *InetDiagMsg, _ *TCPInfo) {
		if m.State == stateListen {
			l, ok = listener(m), true
		}
	})
	return l, ok, err
}

// unspecified is 0.0.0.0 or ::, as addr's family.
func unspecified(a netip.Addr) netip.Addr {
	if a.Is4() || a.Is4In6() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}
