package kernel

import (
	"time"
)

// Senders is what held the senders of a namespace's TCP connections, as
// the kernel accounts it per connection (struct tcp_info, read with
// every socket of the snapshot's dump), summed per listening port and
// per peer. Counters are cumulative from Since, as the kernel's own
// counters are: a rule takes the difference between two snapshots
// (Window.Senders). Each connection counts from its first look: its
// tcp_info then (all it did before, when it began after Since); from
// then on what it added between looks; and at its end what it added
// since its last look, read from the kernel's notice of its end
// (sock_diag's destroy broadcast), or, where that notice was not had,
// nothing more: a connection that left between two looks is accounted
// at its last look (Left), and one that began and ended between two
// looks without its end seen is not accounted at all (EndsLost says
// how many notices the kernel could not deliver).
type Senders struct {
	// Since is when the accounting began: the first snapshot of the
	// source that took this one.
	Since time.Time `json:"since"`
	// InfoSize is the size of struct tcp_info this kernel sends: 280
	// bytes on 6.18. Fields of a later kernel are 0 below it
	// (tcpi_total_rto*: 248 bytes, Linux 6.7; tcpi_snd_wnd: 232, 5.4;
	// tcpi_rwnd_limited, tcpi_sndbuf_limited: 192, 4.10).
	InfoSize int `json:"info_size,omitempty"`
	// Listeners are the connections accepted on each listening port.
	Listeners []SenderGroup `json:"listeners,omitempty"`
	// Peers are the connections per peer: a client's address for the
	// connections it made to a listener here ("10.0.0.2"), a
	// destination's address and port for those made from here
	// ("10.0.0.3:5432"); the MaxSenderPeers that were busiest since the
	// previous snapshot.
	Peers []SenderGroup `json:"peers,omitempty"`
	// Conns are the MaxSenderConns open connections that were busiest
	// since the previous snapshot, one by one, and after those busy,
	// the ones holding the most bytes either way (a slow reader's
	// unread Recv-Q).
	Conns []SenderConn `json:"conns,omitempty"`
	// Ends says whether the kernel's notices of connections' ends were
	// read (false: a kernel or namespace without them; EndsUnavailable
	// says why). EndsLost counts the times the kernel could not queue
	// one to netdoctor (its socket's buffer full: ENOBUFS), each time
	// one notice or more.
	Ends            bool   `json:"ends"`
	EndsUnavailable string `json:"ends_unavailable,omitempty"`
	EndsLost        uint64 `json:"ends_lost,omitempty"`
	// Note says what this snapshot did not see: ESTABLISHED sockets not
	// dumped (see Sockets.Note), a dump the kernel interrupted. Their
	// connections keep their last look meanwhile.
	Note string `json:"note,omitempty"`
}

// MaxSenderPeers bounds Senders.Peers; MaxSenderConns Senders.Conns.
const (
	MaxSenderPeers = 32
	MaxSenderConns = 16
)

// SenderGroup is the connections of one listening port or one peer.
type SenderGroup struct {
	// Port is the listening port of the connections accepted there;
	// Peer, for a peer's group, its address ("10.0.0.2") or, for the
	// destinations of connections made from here, its address and port
	// ("10.0.0.3:5432"), Inbound telling which.
	Port    int    `json:"port,omitempty"`
	Peer    string `json:"peer,omitempty"`
	Inbound bool   `json:"inbound,omitempty"`
	// Since is when the group was first seen: before it, its counters
	// were 0 (a group absent from an earlier snapshot that has an
	// earlier Since was left out of it, not idle).
	Since time.Time `json:"since"`
	// Gauges at the snapshot: its connections open, their bytes not yet
	// acknowledged or not yet sent (Send-Q, tcpi_notsent_bytes), the
	// open connections whose peer's window is zero, and the congestion
	// control of each (INET_DIAG_CONG: "cubic", "bbr").
	Open       int            `json:"open"`
	SendQ      uint64         `json:"send_q"`
	NotSent    uint64         `json:"notsent"`
	ZeroWindow int            `json:"zero_window,omitempty"`
	Cong       map[string]int `json:"cong,omitempty"`
	SenderCounters
}

// SenderCounters are a group's cumulative counters: the kernel's per
// connection, summed, and what netdoctor's looks at them counted.
type SenderCounters struct {
	// Conns counts the connections accounted; Ended those whose end
	// the kernel notified (their last counters read then), Left those
	// that went without it (accounted at their last look), Unlooked
	// those that began and ended between two looks (their end's
	// counters only: nothing of their windows).
	Conns    uint64 `json:"conns"`
	Ended    uint64 `json:"ended,omitempty"`
	Left     uint64 `json:"left,omitempty"`
	Unlooked uint64 `json:"unlooked,omitempty"`
	// BusyUS is the time the senders had data in flight or waiting
	// (tcpi_busy_time), RwndLimitedUS the part of it the peer's receive
	// window held them (tcpi_rwnd_limited), SndbufLimitedUS the part
	// their own send buffer did (tcpi_sndbuf_limited), in microseconds
	// of connection time; the rest (CwndLimitedUS) was in flight with
	// nothing else holding it: bounded by the congestion window and the
	// round trip. The kernel counts in jiffies.
	BusyUS          uint64 `json:"busy_us"`
	RwndLimitedUS   uint64 `json:"rwnd_limited_us"`
	SndbufLimitedUS uint64 `json:"sndbuf_limited_us"`
	// Payload bytes sent (retransmissions included), retransmitted,
	// acknowledged by the peer, received; data segments sent.
	BytesSent     uint64 `json:"bytes_sent"`
	BytesRetrans  uint64 `json:"bytes_retrans,omitempty"`
	BytesAcked    uint64 `json:"bytes_acked"`
	BytesReceived uint64 `json:"bytes_received"`
	DataSegsOut   uint64 `json:"data_segs_out"`
	// Retrans are the segments retransmitted (tcpi_total_retrans);
	// RTOs the retransmission timeouts (tcpi_total_rto), RTORecoveries
	// the recoveries they began and RTOTimeMS the time spent in those,
	// in milliseconds.
	Retrans       uint64 `json:"retrans,omitempty"`
	RTOs          uint64 `json:"rtos,omitempty"`
	RTORecoveries uint64 `json:"rto_recoveries,omitempty"`
	RTOTimeMS     uint64 `json:"rto_time_ms,omitempty"`

	// What the looks saw, one look being one connection in one
	// snapshot: sums over looks, so that a window's mean is the
	// difference of a sum over that of Looks. RTTSumUS sums the
	// smoothed RTT, MinRTTSumUS the lowest, CwndSum the congestion
	// window (segments), SndWndSum the peer's window (bytes), SendQSum
	// and NotSentSum the bytes queued.
	Looks       uint64 `json:"looks"`
	RTTSumUS    uint64 `json:"rtt_sum_us"`
	MinRTTSumUS uint64 `json:"min_rtt_sum_us"`
	CwndSum     uint64 `json:"cwnd_sum"`
	SndWndSum   uint64 `json:"snd_wnd_sum"`
	SendQSum    uint64 `json:"send_q_sum"`
	NotSentSum  uint64 `json:"notsent_sum"`
	// ZeroWindowLooks found the peer's window at zero (or the sender
	// probing it); SndbufFullLooks the send buffer full: less room in
	// SO_SNDBUF than half what it queued, below which the kernel does not
	// wake a writer. The kernel's sndbuf-limited time counts only what
	// the buffer held while the windows had room: a buffer filled behind
	// a closed window is the window's time.
	ZeroWindowLooks uint64 `json:"zero_window_looks,omitempty"`
	SndbufFullLooks uint64 `json:"sndbuf_full_looks,omitempty"`
	// SendingLooks found data in flight or unsent, with CwndSendingSum
	// the congestion window then; IdleLooks found the connection idle
	// longer than its retransmission timeout, with CwndIdleSum the
	// window kept meanwhile. The kernel restarts the window from the
	// initial one (10 segments) when a connection sends again after
	// such an idle, unless tcp_slow_start_after_idle is 0 or its
	// congestion control keeps the window itself (BBR); CUBIC and Reno
	// restart, halving the window per RTO of idle down to the initial.
	SendingLooks   uint64 `json:"sending_looks,omitempty"`
	CwndSendingSum uint64 `json:"cwnd_sending_sum,omitempty"`
	IdleLooks      uint64 `json:"idle_looks,omitempty"`
	CwndIdleSum    uint64 `json:"cwnd_idle_sum,omitempty"`
	// IdleResumes counts the connections seen idle longer than their
	// RTO at one look that had sent data by the next: answers that
	// began after such an idle (a lower bound: several may fit between
	// two looks). Restarts are those of them the kernel restarted the
	// window of (tcp_slow_start_after_idle 1, a congestion control
	// that honours it, a window above the initial), and
	// RestartCwndSum the windows they had before.
	IdleResumes    uint64 `json:"idle_resumes,omitempty"`
	Restarts       uint64 `json:"restarts,omitempty"`
	RestartCwndSum uint64 `json:"restart_cwnd_sum,omitempty"`
}

// CwndLimitedUS is the part of the busy time neither window nor buffer
// held: data in flight, bounded by the congestion window.
func (c SenderCounters) CwndLimitedUS() uint64 {
	return c.BusyUS - min(c.BusyUS, c.RwndLimitedUS+c.SndbufLimitedUS)
}

// Add sums two counters.
func (c *SenderCounters) Add(d SenderCounters) {
	c.Conns += d.Conns
	c.Ended += d.Ended
	c.Left += d.Left
	c.Unlooked += d.Unlooked
	c.BusyUS += d.BusyUS
	c.RwndLimitedUS += d.RwndLimitedUS
	c.SndbufLimitedUS += d.SndbufLimitedUS
	c.BytesSent += d.BytesSent
	c.BytesRetrans += d.BytesRetrans
	c.BytesAcked += d.BytesAcked
	c.BytesReceived += d.BytesReceived
	c.DataSegsOut += d.DataSegsOut
	c.Retrans += d.Retrans
	c.RTOs += d.RTOs
	c.RTORecoveries += d.RTORecoveries
	c.RTOTimeMS += d.RTOTimeMS
	c.Looks += d.Looks
	c.RTTSumUS += d.RTTSumUS
	c.MinRTTSumUS += d.MinRTTSumUS
	c.CwndSum += d.CwndSum
	c.SndWndSum += d.SndWndSum
	c.SendQSum += d.SendQSum
	c.NotSentSum += d.NotSentSum
	c.ZeroWindowLooks += d.ZeroWindowLooks
	c.SndbufFullLooks += d.SndbufFullLooks
	c.SendingLooks += d.SendingLooks
	c.CwndSendingSum += d.CwndSendingSum
	c.IdleLooks += d.IdleLooks
	c.CwndIdleSum += d.CwndIdleSum
	c.IdleResumes += d.IdleResumes
	c.Restarts += d.Restarts
	c.RestartCwndSum += d.RestartCwndSum
}

// Sub is c − d field by field, a field that went down counting 0 (a
// group's counters only rise; a bundle edited by hand may not).
func (c SenderCounters) Sub(d SenderCounters) SenderCounters {
	s := func(a, b uint64) uint64 { return a - min(a, b) }
	return SenderCounters{
		Conns: s(c.Conns, d.Conns), Ended: s(c.Ended, d.Ended), Left: s(c.Left, d.Left), Unlooked: s(c.Unlooked, d.Unlooked),
		BusyUS: s(c.BusyUS, d.BusyUS), RwndLimitedUS: s(c.RwndLimitedUS, d.RwndLimitedUS), SndbufLimitedUS: s(c.SndbufLimitedUS, d.SndbufLimitedUS),
		BytesSent: s(c.BytesSent, d.BytesSent), BytesRetrans: s(c.BytesRetrans, d.BytesRetrans), BytesAcked: s(c.BytesAcked, d.BytesAcked),
		BytesReceived: s(c.BytesReceived, d.BytesReceived), DataSegsOut: s(c.DataSegsOut, d.DataSegsOut),
		Retrans: s(c.Retrans, d.Retrans), RTOs: s(c.RTOs, d.RTOs), RTORecoveries: s(c.RTORecoveries, d.RTORecoveries), RTOTimeMS: s(c.RTOTimeMS, d.RTOTimeMS),
		Looks: s(c.Looks, d.Looks), RTTSumUS: s(c.RTTSumUS, d.RTTSumUS), MinRTTSumUS: s(c.MinRTTSumUS, d.MinRTTSumUS), CwndSum: s(c.CwndSum, d.CwndSum),
		SndWndSum: s(c.SndWndSum, d.SndWndSum), SendQSum: s(c.SendQSum, d.SendQSum), NotSentSum: s(c.NotSentSum, d.NotSentSum),
		ZeroWindowLooks: s(c.ZeroWindowLooks, d.ZeroWindowLooks), SndbufFullLooks: s(c.SndbufFullLooks, d.SndbufFullLooks),
		SendingLooks: s(c.SendingLooks, d.SendingLooks), CwndSendingSum: s(c.CwndSendingSum, d.CwndSendingSum),
		IdleLooks: s(c.IdleLooks, d.IdleLooks), CwndIdleSum: s(c.CwndIdleSum, d.CwndIdleSum),
		IdleResumes: s(c.IdleResumes, d.IdleResumes), Restarts: s(c.Restarts, d.Restarts), RestartCwndSum: s(c.RestartCwndSum, d.RestartCwndSum),
	}
}

// SenderConn is one open connection at a snapshot.
type SenderConn struct {
	Local  string `json:"local"`  // "10.0.0.1:80"
	Remote string `json:"remote"` // "10.0.0.2:41312"
	// Inbound says it was accepted by a listener here (Local's port).
	Inbound bool   `json:"inbound,omitempty"`
	State   string `json:"state"`
	Cong    string `json:"cong,omitempty"`
	// Cwnd and Ssthresh are the congestion window and the slow-start
	// threshold, in segments (Ssthresh 0: none set yet), MSS the segment
	// size it sends; SndWnd the window the peer advertises and RcvWnd
	// the one it advertises itself, in bytes.
	Cwnd     uint32 `json:"cwnd"`
	Ssthresh uint32 `json:"ssthresh,omitempty"`
	MSS      uint32 `json:"mss"`
	SndWnd   uint32 `json:"snd_wnd"`
	RcvWnd   uint32 `json:"rcv_wnd,omitempty"`
	// SendQ is what it sent or queued that the peer has not
	// acknowledged, NotSent the part of it not sent yet, Unacked the
	// segments in flight; RecvQ what it received that its application
	// has not read. SndBuf and RcvBuf are its buffers' limits (SO_SNDBUF
	// and SO_RCVBUF as the kernel doubled or autotuned them),
	// WmemQueued what its send queue holds against SndBuf.
	SendQ      uint32 `json:"send_q"`
	NotSent    uint32 `json:"notsent,omitempty"`
	Unacked    uint32 `json:"unacked,omitempty"`
	RecvQ      uint32 `json:"recv_q,omitempty"`
	SndBuf     uint32 `json:"sndbuf"`
	WmemQueued uint32 `json:"wmem_queued,omitempty"`
	RcvBuf     uint32 `json:"rcvbuf"`
	// RTT, MinRTT and RTO in microseconds; DeliveryRate the last
	// delivery-rate sample in bytes a second, AppLimited when the
	// application, not the network, bounded it.
	RTTUS        uint32 `json:"rtt_us"`
	MinRTTUS     uint32 `json:"min_rtt_us,omitempty"`
	RTOUS        uint32 `json:"rto_us"`
	DeliveryRate uint64 `json:"delivery_rate,omitempty"`
	AppLimited   bool   `json:"app_limited,omitempty"`
	// Probes are the zero-window probes sent and not answered, Backoff
	// the RTO's backoff; Timer the timer pending ("retransmit",
	// "keepalive", "probe": the zero-window probe); LastSendMS how long
	// ago it last sent data.
	Probes     uint8  `json:"probes,omitempty"`
	Backoff    uint8  `json:"backoff,omitempty"`
	Timer      string `json:"timer,omitempty"`
	LastSendMS uint32 `json:"last_send_ms"`
	// Its own counters since it began (tcp_info's).
	BusyUS          uint64 `json:"busy_us"`
	RwndLimitedUS   uint64 `json:"rwnd_limited_us"`
	SndbufLimitedUS uint64 `json:"sndbuf_limited_us"`
	BytesSent       uint64 `json:"bytes_sent"`
	BytesRetrans    uint64 `json:"bytes_retrans,omitempty"`
	Retrans         uint32 `json:"retrans,omitempty"`
	RTOs            uint16 `json:"rtos,omitempty"`
	// BusySinceUS is its busy time since the previous snapshot (its
	// rank among Conns).
	BusySinceUS uint64 `json:"busy_since_us"`
}

// SenderDeltas returns, per listening port and per peer, what each
// group's counters rose by over a series of snapshots' senders (nil where
// a snapshot has none) that began at start, with its gauges at the end:
// the groups of the last snapshot with senders, each counted from 0 when
// it was first seen (Since) after the bundle's first snapshot, else from
// the earliest snapshot that lists it (a peer may enter the busiest
// MaxSenderPeers late: then what it did before is left out, never
// counted twice). nil when no snapshot has senders.
func SenderDeltas(start time.Time, series []*Senders) (listeners, peers []SenderGroup) {
	var last *Senders
	for i := len(series) - 1; i >= 0 && last == nil; i-- {
		last = series[i]
	}
	if last == nil {
		return nil, nil
	}
	delta := func(gs []SenderGroup, of func(*Senders) []SenderGroup) []SenderGroup {
		var out []SenderGroup
		for _, g := range gs {
			d := g
			if !g.Since.After(start) {
				for _, s := range series {
					if s == nil {
						continue
					}
					if base, ok := findGroup(of(s), g); ok {
						d.SenderCounters = g.SenderCounters.Sub(base.SenderCounters)
						break
					}
				}
			}
			out = append(out, d)
		}
		return out
	}
	return delta(last.Listeners, func(s *Senders) []SenderGroup { return s.Listeners }),
		delta(last.Peers, func(s *Senders) []SenderGroup { return s.Peers })
}

func findGroup(gs []SenderGroup, g SenderGroup) (SenderGroup, bool) {
	for _, x := range gs {
		if x.Port == g.Port && x.Peer == g.Peer && x.Inbound == g.Inbound {
			return x, true
		}
	}
	return SenderGroup{}, false
}
