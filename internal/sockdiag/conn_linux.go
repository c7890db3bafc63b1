package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"golang.org/x/sys/unix"
)

// recvBufLen is the read buffer per recv. The kernel fills a dump datagram
// up to 32 KiB (SKB_WITH_OVERHEAD(32768) in netlink_dump), so a larger
// buffer gains nothing; a smaller one would truncate.
const recvBufLen = 32 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, recvBufLen); return &b }}

// conn is a NETLINK_SOCK_DIAG socket with one dump request in flight.
type conn struct{ fd int }

// open creates the netlink socket. The socket belongs to the network
// namespace of the calling thread; callers observing another namespace
// must call open on a thread that has entered it. Reading may then happen
// on any thread.
func open() (*conn, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, fmt.Errorf("open sock_diag socket: %w", err)
	}
	// A larger socket buffer lets the kernel queue the next datagram while
	// we decode the current one. Failure only costs speed.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, 1<<20)
	if err := unix.Bind(fd, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind sock_diag socket: %w", err)
	}
	return &conn{fd: fd}, nil
}

func (c *conn) close() { unix.Close(c.fd) }

// request sends a dump request of the given message type.
func (c *conn) request(typ uint16, body []byte) error {
	msg := make([]byte, nlmsgHdrLen+len(body))
	binary.NativeEndian.PutUint32(msg, uint32(len(msg)))
	binary.NativeEndian.PutUint16(msg[4:], typ)
	binary.NativeEndian.PutUint16(msg[6:], nlmFRequest|nlmFDump)
	binary.NativeEndian.PutUint32(msg[8:], 1) // sequence
	copy(msg[nlmsgHdrLen:], body)
	return unix.Sendto(c.fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK})
}

// receive reads the whole dump, calling fn for each socket's payload. It
// returns ErrPartial (wrapped) if the kernel flagged the dump interrupted.
func (c *conn) receive(fn func(payload []byte) error) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	interrupted := false
	for {
		n, _, err := unix.Recvfrom(c.fd, buf, 0)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("read sock_diag: %w", err)
		}
		done, intr, err := Messages(buf[:n], fn)
		interrupted = interrupted || intr
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	if interrupted {
		return ErrPartial
	}
	return nil
}

// inetRequest builds struct inet_diag_req_v2 for the TCP states of one
// address family, asking for the extensions in ext (a bit per attribute,
// 1<<(INET_DIAG_x-1)). Every extension costs kernel time per socket, so
// the dumps of the many non-listening sockets ask for none: the fixed
// message carries all netdoctor needs of them.
func inetRequest(family uint8, states uint32, ext uint8) []byte {
	return inetProtoRequest(family, unix.IPPROTO_TCP, states, ext)
}

// inetProtoRequest is inetRequest for another protocol (UDP).
func inetProtoRequest(family, proto uint8, states uint32, ext uint8) []byte {
	b := make([]byte, 56)
	b[0] = family
	b[1] = proto
	b[2] = ext
	binary.NativeEndian.PutUint32(b[4:], states)
	return b
}

// compatRequest builds the legacy struct inet_diag_req for a
// TCPDIAG_GETSOCK dump. The kernel serves it with sdiag_family AF_UNSPEC
// (inet_diag_dump_compat), so one walk of the established hash returns
// IPv4 and IPv6 sockets together, half the kernel time of one
// SOCK_DIAG_BY_FAMILY dump per family. ext is idiag_ext, as in
// inetRequest.
func compatRequest(states uint32, ext uint8) []byte {
	b := make([]byte, 60)
	b[3] = ext
	binary.NativeEndian.PutUint32(b[52:], states)
	return b
}

// unixRequest builds struct unix_diag_req asking for names and queue
// lengths of all states.
func unixRequest() []byte {
	const showName, showRQLen = 0x1, 0x10
	b := make([]byte, 24)
	b[0] = unix.AF_UNIX
	binary.NativeEndian.PutUint32(b[4:], ^uint32(0))
	binary.NativeEndian.PutUint32(b[12:], showName|showRQLen)
	return b
}
