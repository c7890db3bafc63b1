package sockdiag

import (
	"encoding/binary"
	"fmt"
	"time"
)

// TCPInfo is the part of struct tcp_info (include/uapi/linux/tcp.h,
// https://elixir.bootlin.com/linux/v6.6/source/include/uapi/linux/tcp.h)
// that tells what a connection is doing: when it last sent and received
// data, how many data segments and bytes went each way, and its RTT.
// The kernel sends the struct in an INET_DIAG_INFO attribute, as long as
// the kernel's own version of it: older kernels send less, and Size says
// how much came. A field the kernel did not send is zero; Has says
// whether it was sent.
type TCPInfo struct {
	Size  int
	State uint8
	// LastDataSent, LastDataRecv and LastAckRecv are how long ago the
	// connection last sent data, received data and received an ACK, in
	// milliseconds (jiffies rounded): the kernel computes them when it
	// answers.
	LastDataSent, LastDataRecv, LastAckRecv uint32
	// RTT and RTTVar are the smoothed round-trip time and its mean
	// deviation, in microseconds.
	RTT, RTTVar uint32
	Unacked     uint32
	// BytesAcked and BytesReceived count payload bytes (Linux 4.1+);
	// BytesAcked counts the SYN as one more.
	BytesAcked, BytesReceived uint64
	// SegsOut and SegsIn count all segments, DataSegsOut and DataSegsIn
	// those carrying data (Linux 4.2+ and 4.6+).
	SegsOut, SegsIn         uint32
	DataSegsIn, DataSegsOut uint32
	// MinRTT is the lowest RTT sample the kernel kept (a windowed
	// minimum over tcp_min_rtt_wlen, 300 s by default), in microseconds,
	// the handshake's among them (Linux 4.6+). On a request/response
	// connection the smoothed RTT is not the network's: the peer's ACK
	// rides on its answer, so each sample holds the answer's time.
	MinRTT uint32
	// BusyTime is the time in microseconds the connection had data in
	// flight or waiting to be sent (Linux 4.10+).
	BusyTime uint64
	// SndMSS is the segment size it sends, PMTU the path MTU it
	// believes, AdvMSS the MSS it announced; Lost the segments it
	// believes lost now and TotalRetrans all it retransmitted.
	SndMSS, PMTU, AdvMSS uint32
	Lost, TotalRetrans   uint32
}

// Offsets in struct tcp_info, and the size at which each field first
// appeared.
const (
	tiSndMSS       = 16
	tiLost         = 32
	tiPMTU         = 60
	tiAdvMSS       = 84
	tiTotalRetrans = 100
	tiLastDataSent = 44
	tiLastDataRecv = 52
	tiLastAckRecv  = 56
	tiRTT          = 68
	tiRTTVar       = 72
	tiBytesAcked   = 120
	tiBytesRecv    = 128
	tiSegsOut      = 136
	tiSegsIn       = 140
	tiMinRTT       = 148
	tiDataSegsIn   = 152
	tiDataSegsOut  = 156
	tiBusyTime     = 168

	// tcpInfoMinLen is struct tcp_info up to tcpi_total_retrans, as
	// Linux 3.x sent it: the fields every kernel has.
	tcpInfoMinLen = 104
)

// DecodeTCPInfo fills t from an INET_DIAG_INFO attribute's payload (or a
// getsockopt(TCP_INFO) buffer). A payload shorter than the oldest
// struct is an error; a longer one than this code knows is fine.
func DecodeTCPInfo(b []byte, t *TCPInfo) error {
	*t = TCPInfo{}
	if len(b) < tcpInfoMinLen {
		return fmt.Errorf("%w: tcp_info is %d bytes, want at least %d", ErrTruncated, len(b), tcpInfoMinLen)
	}
	u32 := func(off int) uint32 {
		if len(b) < off+4 {
			return 0
		}
		return binary.NativeEndian.Uint32(b[off:])
	}
	u64 := func(off int) uint64 {
		if len(b) < off+8 {
			return 0
		}
		return binary.NativeEndian.Uint64(b[off:])
	}
	t.Size = len(b)
	t.State = b[0]
	t.LastDataSent, t.LastDataRecv, t.LastAckRecv = u32(tiLastDataSent), u32(tiLastDataRecv), u32(tiLastAckRecv)
	t.RTT, t.RTTVar = u32(tiRTT), u32(tiRTTVar)
	t.Unacked = u32(24)
	t.BytesAcked, t.BytesReceived = u64(tiBytesAcked), u64(tiBytesRecv)
	t.SegsOut, t.SegsIn = u32(tiSegsOut), u32(tiSegsIn)
	t.DataSegsIn, t.DataSegsOut = u32(tiDataSegsIn), u32(tiDataSegsOut)
	t.MinRTT = u32(tiMinRTT)
	t.BusyTime = u64(tiBusyTime)
	t.SndMSS, t.PMTU, t.AdvMSS = u32(tiSndMSS), u32(tiPMTU), u32(tiAdvMSS)
	t.Lost, t.TotalRetrans = u32(tiLost), u32(tiTotalRetrans)
	return nil
}

// HasDataSegs reports whether the kernel sent tcpi_data_segs_in and
// tcpi_data_segs_out (Linux 4.6+).
func (t *TCPInfo) HasDataSegs() bool { return t.Size >= tiDataSegsOut+4 }

// HasBusyTime reports whether the kernel sent tcpi_busy_time (Linux
// 4.10+).
func (t *TCPInfo) HasBusyTime() bool { return t.Size >= tiBusyTime+8 }

// MinRTTOK is the lowest RTT the kernel sampled, and whether it has one:
// not before Linux 4.6, nor before any sample (the kernel's ~0U).
func (t *TCPInfo) MinRTTOK() (time.Duration, bool) {
	if t.Size < tiMinRTT+4 || t.MinRTT == ^uint32(0) {
		return 0, false
	}
	return time.Duration(t.MinRTT) * time.Microsecond, true
}

// SRTT is the smoothed round-trip time.
func (t *TCPInfo) SRTT() time.Duration { return time.Duration(t.RTT) * time.Microsecond }

// inetDiagInfo is INET_DIAG_INFO, the attribute that carries struct
// tcp_info.
const inetDiagInfo = 2

// DecodeInetDiagInfo fills m from one SOCK_DIAG_BY_FAMILY message and t
// from its INET_DIAG_INFO attribute; ok is false when the message has
// none (the request did not ask, or the socket is not a full one).
func DecodeInetDiagInfo(b []byte, m *InetDiagMsg, t *TCPInfo) (ok bool, err error) {
	if err := DecodeInetDiagMsg(b, m); err != nil {
		return false, err
	}
	var derr error
	_ = walkAttrs(b[inetDiagMsgLen:], func(typ uint16, v []byte) {
		if typ == inetDiagInfo {
			derr = DecodeTCPInfo(v, t)
			ok = derr == nil
		}
	})
	return ok, derr
}
