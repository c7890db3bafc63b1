package sockdiag

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Netlink constants from include/uapi/linux/netlink.h and sock_diag.h.
const (
	nlmsgHdrLen      = 16
	nlmsgError       = 2
	nlmsgDone        = 3
	nlmFRequest      = 0x1
	nlmFDump         = 0x300
	nlmFDumpIntr     = 0x10
	sockDiagByFamily = 20
	tcpDiagGetSock   = 18 // legacy TCPDIAG_GETSOCK
)

// ErrTruncated reports a message shorter than the structure it must hold.
var ErrTruncated = errors.New("truncated netlink message")

// ErrPartial reports a dump the kernel interrupted (NLM_F_DUMP_INTR): the
// socket tables changed while being walked, so some sockets may be missing
// or counted twice. The results are still returned.
var ErrPartial = errors.New("sock_diag dump interrupted, results partial")

// InetDiagMsg is struct inet_diag_msg from include/uapi/linux/inet_diag.h:
// https://elixir.bootlin.com/linux/v6.6/source/include/uapi/linux/inet_diag.h
// Addresses are kept as 16 raw bytes; an IPv4 address uses the first 4.
type InetDiagMsg struct {
	Family  uint8
	State   uint8
	Timer   uint8
	Retrans uint8
	SPort   uint16
	DPort   uint16
	Src     [16]byte
	Dst     [16]byte
	IfIndex uint32
	Cookie  uint64
	Expires uint32
	// RQueue and WQueue are Recv-Q and Send-Q: for a listener, the accept
	// queue length and its limit (the effective backlog).
	RQueue uint32
	WQueue uint32
	UID    uint32
	Inode  uint32
	// Drops is sk_drops from the INET_DIAG_SKMEMINFO attribute, sent
	// only when the request asked for it; HasDrops says it was there.
	Drops    uint32
	HasDrops bool
	// RcvBuf and RmemAlloc are the receive buffer's limit and what it
	// holds (SK_MEMINFO_RCVBUF, SK_MEMINFO_RMEM_ALLOC), from the same
	// attribute.
	RcvBuf, RmemAlloc uint32
}

// inetDiagMsgLen is sizeof(struct inet_diag_msg).
const inetDiagMsgLen = 72

// Attribute types and indexes from include/uapi/linux/inet_diag.h and
// sock_diag.h.
const (
	inetDiagSKMemInfo = 7 // INET_DIAG_SKMEMINFO (4 is INET_DIAG_CONG): u32[SK_MEMINFO_VARS]
	skMemInfoDrops    = 8 // SK_MEMINFO_DROPS, the ninth u32 (Linux 3.19+)
	skMemInfoRmem     = 0 // SK_MEMINFO_RMEM_ALLOC
	skMemInfoRcvBuf   = 1 // SK_MEMINFO_RCVBUF
)

// DecodeInetDiagMsg fills m from the payload of one SOCK_DIAG_BY_FAMILY
// message, and its drop counter from an INET_DIAG_SKMEMINFO attribute if
// one follows. Attribute bytes that do not parse are ignored: the fixed
// part is still a good socket, and an extension must not cost the dump.
func DecodeInetDiagMsg(b []byte, m *InetDiagMsg) error {
	if len(b) < inetDiagMsgLen {
		return fmt.Errorf("%w: inet_diag_msg is %d bytes, want %d", ErrTruncated, len(b), inetDiagMsgLen)
	}
	m.Family, m.State, m.Timer, m.Retrans = b[0], b[1], b[2], b[3]
	// Ports and addresses are in network byte order; the rest is host order.
	m.SPort = binary.BigEndian.Uint16(b[4:])
	m.DPort = binary.BigEndian.Uint16(b[6:])
	copy(m.Src[:], b[8:24])
	copy(m.Dst[:], b[24:40])
	m.IfIndex = binary.NativeEndian.Uint32(b[40:])
	m.Cookie = binary.NativeEndian.Uint64(b[44:])
	m.Expires = binary.NativeEndian.Uint32(b[52:])
	m.RQueue = binary.NativeEndian.Uint32(b[56:])
	m.WQueue = binary.NativeEndian.Uint32(b[60:])
	m.UID = binary.NativeEndian.Uint32(b[64:])
	m.Inode = binary.NativeEndian.Uint32(b[68:])
	m.Drops, m.HasDrops, m.RcvBuf, m.RmemAlloc = 0, false, 0, 0
	if len(b) > inetDiagMsgLen {
		_ = walkAttrs(b[inetDiagMsgLen:], func(typ uint16, v []byte) {
			if typ == inetDiagSKMemInfo && len(v) >= 4*(skMemInfoRcvBuf+1) {
				m.RmemAlloc = binary.NativeEndian.Uint32(v[4*skMemInfoRmem:])
				m.RcvBuf = binary.NativeEndian.Uint32(v[4*skMemInfoRcvBuf:])
			}
			// Kernels older than 3.19 send fewer entries, without
			// SK_MEMINFO_DROPS: then there is no value, not a zero.
			if typ == inetDiagSKMemInfo && len(v) >= 4*(skMemInfoDrops+1) {
				m.Drops = binary.NativeEndian.Uint32(v[4*skMemInfoDrops:])
				m.HasDrops = true
			}
		})
	}
	return nil
}

// UnixDiagMsg is struct unix_diag_msg plus the attributes netdoctor asks
// for (include/uapi/linux/unix_diag.h).
type UnixDiagMsg struct {
	Family uint8
	Type   uint8 // SOCK_STREAM = 1, SOCK_DGRAM = 2, SOCK_SEQPACKET = 5
	State  uint8
	Inode  uint32
	// Cookie is udiag_cookie, the kernel's id of the socket: an exact
	// lookup that gives it finds this socket only, never a later one
	// that reuses the inode number.
	Cookie uint64
	Name   string // bound path; abstract names start with "@"
	// Peer is UNIX_DIAG_PEER, the inode of the socket at the other end
	// (for a client, the server's accepted socket); HasPeer says it was
	// sent (a connected socket whose peer is alive).
	Peer    uint32
	HasPeer bool
	// RQueue and WQueue come from UNIX_DIAG_RQLEN: for a listener, the
	// accept queue length and the backlog; for a connected stream
	// socket, the bytes unread in its own receive queue and the memory
	// (skb truesize) of what it sent that its peer has not read yet.
	RQueue uint32
	WQueue uint32
	HasRQ  bool
}

const (
	unixDiagMsgLen = 16
	unixDiagName   = 0 // UNIX_DIAG_NAME
	unixDiagPeer   = 2 // UNIX_DIAG_PEER
	unixDiagRQLen  = 4 // UNIX_DIAG_RQLEN
)

// DecodeUnixDiagMsg fills m from one unix sock_diag message payload,
// including its UNIX_DIAG_NAME, UNIX_DIAG_PEER and UNIX_DIAG_RQLEN
// attributes.
func DecodeUnixDiagMsg(b []byte, m *UnixDiagMsg) error {
	if len(b) < unixDiagMsgLen {
		return fmt.Errorf("%w: unix_diag_msg is %d bytes, want %d", ErrTruncated, len(b), unixDiagMsgLen)
	}
	*m = UnixDiagMsg{Family: b[0], Type: b[1], State: b[2], Inode: binary.NativeEndian.Uint32(b[4:]),
		Cookie: uint64(binary.NativeEndian.Uint32(b[8:])) | uint64(binary.NativeEndian.Uint32(b[12:]))<<32}
	return walkAttrs(b[unixDiagMsgLen:], func(typ uint16, v []byte) {
		switch typ {
		case unixDiagName:
			m.Name = unixName(v)
		case unixDiagPeer:
			if len(v) >= 4 {
				m.Peer = binary.NativeEndian.Uint32(v)
				m.HasPeer = true
			}
		case unixDiagRQLen:
			if len(v) >= 8 {
				m.RQueue = binary.NativeEndian.Uint32(v)
				m.WQueue = binary.NativeEndian.Uint32(v[4:])
				m.HasRQ = true
			}
		}
	})
}

// unixName renders a sun_path: abstract names begin with a NUL byte,
// shown as "@" the way ss does.
func unixName(v []byte) string {
	if len(v) == 0 {
		return ""
	}
	if v[0] == 0 {
		return "@" + string(v[1:])
	}
	for i, c := range v {
		if c == 0 {
			return string(v[:i])
		}
	}
	return string(v)
}

// walkAttrs calls fn for each netlink attribute (struct nlattr) in b.
func walkAttrs(b []byte, fn func(typ uint16, v []byte)) error {
	for len(b) >= 4 {
		l := int(binary.NativeEndian.Uint16(b))
		typ := binary.NativeEndian.Uint16(b[2:]) & 0x3fff // drop NLA_F_NESTED/NET_BYTEORDER
		if l < 4 || l > len(b) {
			return fmt.Errorf("%w: attribute length %d with %d bytes left", ErrTruncated, l, len(b))
		}
		fn(typ, b[4:l])
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return nil
}

// Messages walks the netlink messages in one datagram read from a dump,
// calling fn with the payload of each SOCK_DIAG_BY_FAMILY message. It
// returns done when the dump's NLMSG_DONE arrived, and intr when any
// message carried NLM_F_DUMP_INTR. An NLMSG_ERROR becomes an error.
func Messages(b []byte, fn func(payload []byte) error) (done, intr bool, err error) {
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b))
		typ := binary.NativeEndian.Uint16(b[4:])
		flags := binary.NativeEndian.Uint16(b[6:])
		if l < nlmsgHdrLen || l > len(b) {
			return done, intr, fmt.Errorf("%w: message length %d with %d bytes left", ErrTruncated, l, len(b))
		}
		if flags&nlmFDumpIntr != 0 {
			intr = true
		}
		payload := b[nlmsgHdrLen:l]
		switch typ {
		case nlmsgDone:
			return true, intr, nil
		case nlmsgError:
			if len(payload) < 4 {
				return done, intr, fmt.Errorf("%w: nlmsgerr", ErrTruncated)
			}
			if errno := int32(binary.NativeEndian.Uint32(payload)); errno != 0 {
				return true, intr, Errno(-errno)
			}
		case sockDiagByFamily, tcpDiagGetSock:
			if err := fn(payload); err != nil {
				return done, intr, err
			}
		}
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return done, intr, nil
}

// Errno is an error number the kernel returned in NLMSG_ERROR.
type Errno int32

func (e Errno) Error() string { return fmt.Sprintf("netlink error %d", int32(e)) }

// eachReply walks the answers to exact lookups in one datagram: a
// SOCK_DIAG_BY_FAMILY message for a socket found, an NLMSG_ERROR for one
// that was not. It returns how many answers it saw.
func eachReply(b []byte, fn func(seq uint32, payload []byte)) int {
	n := 0
	for len(b) >= nlmsgHdrLen {
		l := int(binary.NativeEndian.Uint32(b))
		if l < nlmsgHdrLen || l > len(b) {
			break
		}
		switch binary.NativeEndian.Uint16(b[4:]) {
		case sockDiagByFamily:
			fn(binary.NativeEndian.Uint32(b[8:]), b[nlmsgHdrLen:l])
			n++
		case nlmsgError:
			n++
		}
		al := (l + 3) &^ 3
		if al > len(b) {
			break
		}
		b = b[al:]
	}
	return n
}
