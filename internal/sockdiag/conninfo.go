package sockdiag

import (
	"bytes"
	"encoding/binary"
)

// ConnInfo is what a dump that asks for INET_DIAG_INFO, INET_DIAG_CONG
// and INET_DIAG_SKMEMINFO says of a connection beyond inet_diag_msg: its
// tcp_info, its congestion control, its send buffer.
type ConnInfo struct {
	// HasInfo says tcp_info came (a full socket: not TIME_WAIT nor a
	// request socket).
	HasInfo bool
	Info    TCPInfo
	// Cong is the congestion control's name ("cubic", "bbr"), "" when
	// not sent.
	Cong string
	// SndBuf is sk_sndbuf (SO_SNDBUF as the kernel doubled it, or
	// tcp_wmem's autotuned size) and WmemQueued what the send queue
	// holds against it (SK_MEMINFO_SNDBUF, SK_MEMINFO_WMEM_QUEUED).
	SndBuf, WmemQueued uint32
}

// Attribute types and SK_MEMINFO_* indexes read for ConnInfo.
const (
	inetDiagCong         = 4 // INET_DIAG_CONG: the name, NUL-terminated
	skMemInfoSndBuf      = 3 // SK_MEMINFO_SNDBUF
	skMemInfoWmemQueued  = 5 // SK_MEMINFO_WMEM_QUEUED
	congExt              = uint8(1 << (inetDiagCong - 1))
	maxCongName          = 16 // TCP_CA_NAME_MAX
	skMemInfoWmemEntries = skMemInfoWmemQueued + 1
)

// DecodeConn fills m from one SOCK_DIAG_BY_FAMILY message, as
// DecodeInetDiagMsg does, and c from its INET_DIAG_INFO, INET_DIAG_CONG
// and INET_DIAG_SKMEMINFO attributes. An attribute that does not parse
// is left out (c says it is not there); only a truncated inet_diag_msg
// is an error.
func DecodeConn(b []byte, m *InetDiagMsg, c *ConnInfo) error {
	if err := DecodeInetDiagMsg(b, m); err != nil {
		return err
	}
	*c = ConnInfo{}
	_ = walkAttrs(b[inetDiagMsgLen:], func(typ uint16, v []byte) {
		switch typ {
		case inetDiagInfo:
			c.HasInfo = DecodeTCPInfo(v, &c.Info) == nil
		case inetDiagCong:
			c.Cong = congName(v)
		case inetDiagSKMemInfo:
			if len(v) >= 4*skMemInfoWmemEntries {
				c.SndBuf = binary.NativeEndian.Uint32(v[4*skMemInfoSndBuf:])
				c.WmemQueued = binary.NativeEndian.Uint32(v[4*skMemInfoWmemQueued:])
			}
		}
	})
	return nil
}

// congNames are the congestion controls Linux ships, sorted, so that naming one
// does not allocate once per socket and snapshot.
var congNames = [...]string{"bbr", "bic", "cdg", "cubic", "dctcp", "highspeed", "htcp", "hybla", "illinois",
	"lp", "nv", "reno", "scalable", "vegas", "veno", "westwood", "yeah"}

// congName is INET_DIAG_CONG's name: up to its NUL, at most
// TCP_CA_NAME_MAX bytes, printable ASCII only (anything else is a
// module's name this code will not print as it is).
func congName(v []byte) string {
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	}
	if len(v) > maxCongName {
		v = v[:maxCongName]
	}
	for _, n := range congNames {
		if string(v) == n {
			return n
		}
	}
	for _, ch := range v {
		if ch < 0x21 || ch > 0x7e {
			return "?"
		}
	}
	return string(v)
}

// SndbufFull reports whether the send buffer holds the writer: less room
// left than half of what is queued, below which the kernel does not
// report the socket writable (sk_stream_wspace < sk_stream_min_wspace)
// and a blocking write sleeps.
func (c *ConnInfo) SndbufFull() bool {
	return c.SndBuf > 0 && 2*uint64(c.SndBuf-min(c.SndBuf, c.WmemQueued)) < uint64(c.WmemQueued)
}
