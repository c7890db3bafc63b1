package sockdiag

import (
	"encoding/binary"
	"fmt"
	"time"
)

// TCPInfo is struct tcp_info (include/uapi/linux/tcp.h,
// https://elixir.bootlin.com/linux/v6.18/source/include/uapi/linux/tcp.h)
// as netdoctor reads it: what a connection is doing (when it last sent
// and received data, how many data segments and bytes went each way, its
// RTT) and what held its sender (the time it was busy and limited by the
// peer's window or its own send buffer, its congestion window, its
// retransmissions and timeouts). The kernel sends the struct in an
// INET_DIAG_INFO attribute, as long as the kernel's own version of it:
// older kernels send less, and Size says how much came (280 bytes on
// 6.18). A field the kernel did not send is zero; Has says whether it
// was sent.
type TCPInfo struct {
	Size  int
	State uint8
	// CAState is the congestion-control state (TCP_CA_Open 0, Disorder
	// 1, CWR 2, Recovery 3, Loss 4).
	CAState uint8
	// Retransmits are the retransmissions of the current RTO episode,
	// Probes the zero-window (or keepalive) probes sent and not answered,
	// Backoff the RTO's exponential backoff now.
	Retransmits, Probes, Backoff uint8
	// Options are the TCPI_OPT_* bits; SndWscale and RcvWscale the
	// window scales; AppLimited says the last delivery-rate sample was
	// limited by the application (tcpi_delivery_rate_app_limited).
	Options              uint8
	SndWscale, RcvWscale uint8
	AppLimited           bool
	// RTO is the retransmission timeout, in microseconds.
	RTO uint32
	// Ato is the delayed-ACK timeout the connection would use now, in
	// microseconds (the kernel's icsk_ack.ato: 40 ms at least at HZ ≥
	// 100, grown with the gaps between segments received).
	Ato uint32
	// SndMSS and RcvMSS are the segment sizes each way, in bytes.
	SndMSS, RcvMSS uint32
	// Unacked are the segments in flight (packets_out), Sacked those
	// the peer selectively acknowledged, Retrans those retransmitted
	// and not yet acknowledged.
	Unacked, Sacked, Retrans uint32
	// LastDataSent, LastDataRecv and LastAckRecv are how long ago the
	// connection last sent data, received data and received an ACK, in
	// milliseconds (jiffies rounded): the kernel computes them when it
	// answers.
	LastDataSent, LastDataRecv, LastAckRecv uint32
	// RTT and RTTVar are the smoothed round-trip time and its mean
	// deviation, in microseconds.
	RTT, RTTVar uint32
	// SndCwnd is the congestion window and SndSsthresh the slow-start
	// threshold, in segments (TCP_INFINITE_SSTHRESH, 0x7fffffff, until
	// the first reduction); RcvSsthresh the receive window's clamp in
	// bytes.
	SndCwnd, SndSsthresh, RcvSsthresh uint32
	// RcvSpace is the receive buffer's autotuned space, RcvRTT the RTT
	// the receiver measures, in microseconds.
	RcvSpace, RcvRTT uint32
	// PacingRate is the sender's pacing rate, bytes a second.
	PacingRate uint64
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
	// NotsentBytes are bytes the application wrote that the socket has
	// not sent yet (Linux 4.6+): held by the windows, or by Nagle's
	// algorithm while a small segment is unacknowledged.
	NotsentBytes uint32
	// DeliveryRate is the last delivery-rate sample, bytes a second
	// (Linux 4.9+).
	DeliveryRate uint64
	// BusyTime is the time in microseconds the connection had data in
	// flight or waiting to be sent (Linux 4.10+): the sum of the
	// kernel's three "chronos", of which RwndLimited is the time the
	// peer's receive window held the sender and SndbufLimited the time
	// its own send buffer did; the rest is TCP_CHRONO_BUSY, data in
	// flight with nothing else holding it, which the congestion window
	// bounds. They advance in jiffies.
	BusyTime, RwndLimited, SndbufLimited uint64
	// Delivered counts segments delivered, retransmissions included
	// (Linux 4.18+).
	Delivered uint32
	// BytesSent counts payload bytes sent, retransmissions included,
	// and BytesRetrans those retransmitted (Linux 4.19+).
	BytesSent, BytesRetrans uint64
	// SndWnd is the window the peer advertised, scaled, in bytes (Linux
	// 5.4+); RcvWnd the one this end advertises (6.2+).
	SndWnd, RcvWnd uint32
	// TotalRTO counts retransmission timeouts, the handshake's and the
	// recurring ones included, TotalRTORecoveries the recoveries they
	// began, and TotalRTOTime the time spent in those recoveries in
	// milliseconds, one unfinished included (Linux 6.7+).
	TotalRTO, TotalRTORecoveries uint16
	TotalRTOTime                 uint32
	// PMTU is the path MTU it believes, AdvMSS the MSS it announced;
	// Lost the segments it believes lost now and TotalRetrans all it
	// retransmitted.
	PMTU, AdvMSS       uint32
	Lost, TotalRetrans uint32
}

// Offsets in struct tcp_info. A field is there when the kernel's struct
// reaches its end: the size says which kernel sent it.
const (
	tiCAState      = 1
	tiRetransmits  = 2
	tiProbes       = 3
	tiBackoff      = 4
	tiOptions      = 5
	tiWscale       = 6
	tiAppLimited   = 7
	tiRTO          = 8
	tiAto          = 12
	tiSndMSS       = 16
	tiRcvMSS       = 20
	tiUnacked      = 24
	tiSacked       = 28
	tiLost         = 32
	tiRetrans      = 36
	tiLastDataSent = 44
	tiLastDataRecv = 52
	tiLastAckRecv  = 56
	tiPMTU         = 60
	tiRcvSsthresh  = 64
	tiRTT          = 68
	tiRTTVar       = 72
	tiSndSsthresh  = 76
	tiSndCwnd      = 80
	tiAdvMSS       = 84
	tiRcvRTT       = 92
	tiRcvSpace     = 96
	tiTotalRetrans = 100
	tiPacingRate   = 104
	tiBytesAcked   = 120
	tiBytesRecv    = 128
	tiSegsOut      = 136
	tiSegsIn       = 140
	tiNotsent      = 144
	tiMinRTT       = 148
	tiDataSegsIn   = 152
	tiDataSegsOut  = 156
	tiDeliveryRate = 160
	tiBusyTime     = 168
	tiRwndLimited  = 176
	tiSndbufLimit  = 184
	tiDelivered    = 192
	tiBytesSent    = 200
	tiBytesRetrans = 208
	tiSndWnd       = 228
	tiRcvWnd       = 232
	tiTotalRTO     = 240
	tiTotalRTORec  = 242
	tiTotalRTOTime = 244

	// tcpInfoMinLen is struct tcp_info up to tcpi_total_retrans, as
	// Linux 3.x sent it: the fields every kernel has.
	tcpInfoMinLen = 104
)

// DecodeTCPInfo fills t from an INET_DIAG_INFO attribute's payload (or a
// getsockopt(TCP_INFO) buffer), of whatever length the kernel sent: each
// field is read only when the payload holds all of it. A payload shorter
// than the oldest struct is an error; a longer one than this code knows
// is fine.
func DecodeTCPInfo(b []byte, t *TCPInfo) error {
	*t = TCPInfo{}
	if len(b) < tcpInfoMinLen {
		return fmt.Errorf("%w: tcp_info is %d bytes, want at least %d", ErrTruncated, len(b), tcpInfoMinLen)
	}
	u16 := func(off int) uint16 {
		if len(b) < off+2 {
			return 0
		}
		return binary.NativeEndian.Uint16(b[off:])
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
	t.State, t.CAState = b[0], b[tiCAState]
	t.Retransmits, t.Probes, t.Backoff, t.Options = b[tiRetransmits], b[tiProbes], b[tiBackoff], b[tiOptions]
	// Bit fields, low bits first as GCC lays them out on the
	// little-endian machines netdoctor builds for.
	t.SndWscale, t.RcvWscale = b[tiWscale]&0xf, b[tiWscale]>>4
	t.AppLimited = b[tiAppLimited]&1 != 0
	t.RTO, t.Ato = u32(tiRTO), u32(tiAto)
	t.LastDataSent, t.LastDataRecv, t.LastAckRecv = u32(tiLastDataSent), u32(tiLastDataRecv), u32(tiLastAckRecv)
	t.SndMSS, t.RcvMSS = u32(tiSndMSS), u32(tiRcvMSS)
	t.Unacked, t.Sacked, t.Retrans = u32(tiUnacked), u32(tiSacked), u32(tiRetrans)
	t.RTT, t.RTTVar = u32(tiRTT), u32(tiRTTVar)
	t.SndCwnd, t.SndSsthresh, t.RcvSsthresh = u32(tiSndCwnd), u32(tiSndSsthresh), u32(tiRcvSsthresh)
	t.RcvRTT, t.RcvSpace = u32(tiRcvRTT), u32(tiRcvSpace)
	t.PacingRate = u64(tiPacingRate)
	t.NotsentBytes = u32(tiNotsent)
	t.BytesSent, t.BytesRetrans = u64(tiBytesSent), u64(tiBytesRetrans)
	t.BytesAcked, t.BytesReceived = u64(tiBytesAcked), u64(tiBytesRecv)
	t.SegsOut, t.SegsIn = u32(tiSegsOut), u32(tiSegsIn)
	t.DataSegsIn, t.DataSegsOut = u32(tiDataSegsIn), u32(tiDataSegsOut)
	t.MinRTT = u32(tiMinRTT)
	t.DeliveryRate = u64(tiDeliveryRate)
	t.BusyTime, t.RwndLimited, t.SndbufLimited = u64(tiBusyTime), u64(tiRwndLimited), u64(tiSndbufLimit)
	t.Delivered = u32(tiDelivered)
	t.SndWnd, t.RcvWnd = u32(tiSndWnd), u32(tiRcvWnd)
	t.TotalRTO, t.TotalRTORecoveries, t.TotalRTOTime = u16(tiTotalRTO), u16(tiTotalRTORec), u32(tiTotalRTOTime)
	t.PMTU, t.AdvMSS = u32(tiPMTU), u32(tiAdvMSS)
	t.Lost, t.TotalRetrans = u32(tiLost), u32(tiTotalRetrans)
	return nil
}

// has reports whether the kernel sent the field of n bytes at off.
func (t *TCPInfo) has(off, n int) bool { return t.Size >= off+n }

// HasLimited reports whether the kernel sent tcpi_rwnd_limited and
// tcpi_sndbuf_limited (Linux 4.10+, with tcpi_busy_time).
func (t *TCPInfo) HasLimited() bool { return t.has(tiSndbufLimit, 8) }

// HasBytesRetrans reports whether the kernel sent tcpi_bytes_sent and
// tcpi_bytes_retrans (Linux 4.19+).
func (t *TCPInfo) HasBytesRetrans() bool { return t.has(tiBytesRetrans, 8) }

// HasSndWnd reports whether the kernel sent tcpi_snd_wnd, the peer's
// window (Linux 5.4+).
func (t *TCPInfo) HasSndWnd() bool { return t.has(tiSndWnd, 4) }

// HasRcvWnd reports whether the kernel sent tcpi_rcv_wnd (Linux 6.2+).
func (t *TCPInfo) HasRcvWnd() bool { return t.has(tiRcvWnd, 4) }

// HasTotalRTO reports whether the kernel sent tcpi_total_rto,
// tcpi_total_rto_recoveries and tcpi_total_rto_time (Linux 6.7+).
func (t *TCPInfo) HasTotalRTO() bool { return t.has(tiTotalRTOTime, 4) }

// HasDeliveryRate reports whether the kernel sent tcpi_delivery_rate
// (Linux 4.9+).
func (t *TCPInfo) HasDeliveryRate() bool { return t.has(tiDeliveryRate, 8) }

// InfiniteSsthresh is TCP_INFINITE_SSTHRESH: no slow-start threshold
// set yet.
const InfiniteSsthresh = 0x7fffffff

// HasDataSegs reports whether the kernel sent tcpi_data_segs_in and
// tcpi_data_segs_out (Linux 4.6+).
func (t *TCPInfo) HasDataSegs() bool { return t.has(tiDataSegsOut, 4) }

// HasNotsent reports whether the kernel sent tcpi_notsent_bytes (Linux
// 4.6+).
func (t *TCPInfo) HasNotsent() bool { return t.has(tiNotsent, 4) }

// HasBusyTime reports whether the kernel sent tcpi_busy_time (Linux
// 4.10+).
func (t *TCPInfo) HasBusyTime() bool { return t.has(tiBusyTime, 8) }

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
