package sockdiag

import (
	"encoding/binary"
	"net/netip"
)

// SockID names one TCP connection for an exact lookup: its local and
// remote address and port, and the kernel's cookie for it (0 when not
// known: then any socket with the same addresses matches).
type SockID struct {
	Local, Remote netip.AddrPort
	Cookie        uint64
}

// inetDiagNoCookie is INET_DIAG_NOCOOKIE: match whatever the cookie.
const inetDiagNoCookie = ^uint32(0)

// exactRequest builds struct inet_diag_req_v2 that asks for one socket by
// its addresses (inet_diag_find_one_icsk: a hash lookup, whatever the
// size of the socket table), with the extensions in ext.
func exactRequest(id SockID, ext uint8) []byte {
	b := make([]byte, 56)
	b[0] = afInet
	if id.Local.Addr().Is6() && !id.Local.Addr().Is4In6() {
		b[0] = afInet6
	}
	b[1] = 6 // IPPROTO_TCP
	b[2] = ext
	binary.NativeEndian.PutUint32(b[4:], ^uint32(0))
	binary.BigEndian.PutUint16(b[8:], id.Local.Port())
	binary.BigEndian.PutUint16(b[10:], id.Remote.Port())
	putAddr(b[12:28], id.Local.Addr())
	putAddr(b[28:44], id.Remote.Addr())
	if id.Cookie == 0 {
		binary.NativeEndian.PutUint32(b[48:], inetDiagNoCookie)
		binary.NativeEndian.PutUint32(b[52:], inetDiagNoCookie)
	} else {
		binary.NativeEndian.PutUint32(b[48:], uint32(id.Cookie))
		binary.NativeEndian.PutUint32(b[52:], uint32(id.Cookie>>32))
	}
	return b
}

func putAddr(b []byte, a netip.Addr) {
	if a.Is4() || a.Is4In6() {
		v := a.Unmap().As4()
		copy(b, v[:])
		return
	}
	v := a.As16()
	copy(b, v[:])
}

// UnixID names one unix socket for an exact lookup: its inode, and the
// kernel's cookie for it (0 when not known: then the socket that has the
// inode now matches).
type UnixID struct {
	Inode  uint32
	Cookie uint64
}

// unixDiagReqLen is sizeof(struct unix_diag_req).
const unixDiagReqLen = 24

// The udiag_show bits (include/uapi/linux/unix_diag.h).
const (
	unixShowName  = 0x01 // UDIAG_SHOW_NAME
	unixShowPeer  = 0x04 // UDIAG_SHOW_PEER
	unixShowRQLen = 0x10 // UDIAG_SHOW_RQLEN
)

// unixExactRequest builds struct unix_diag_req that asks for one socket
// by its inode (unix_diag_get_exact, which ignores udiag_states), with
// its name, its peer's inode and its queue lengths.
func unixExactRequest(id UnixID) []byte {
	b := make([]byte, unixDiagReqLen)
	b[0] = afUnix
	binary.NativeEndian.PutUint32(b[4:], ^uint32(0))
	binary.NativeEndian.PutUint32(b[8:], id.Inode)
	binary.NativeEndian.PutUint32(b[12:], unixShowName|unixShowPeer|unixShowRQLen)
	if id.Cookie == 0 {
		binary.NativeEndian.PutUint32(b[16:], inetDiagNoCookie)
		binary.NativeEndian.PutUint32(b[20:], inetDiagNoCookie)
	} else {
		binary.NativeEndian.PutUint32(b[16:], uint32(id.Cookie))
		binary.NativeEndian.PutUint32(b[20:], uint32(id.Cookie>>32))
	}
	return b
}
