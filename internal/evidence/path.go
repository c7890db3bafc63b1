package evidence

import "time"

// PathProbe is what run measured of the path between the hosts before
// the load, through the server agent's test endpoint, without the
// server's application in the way: the capacity the application is
// compared against.
type PathProbe struct {
	// Endpoint is the test endpoint's address, as the client reached it.
	Endpoint string `json:"endpoint"`
	// DownBitsPerSecond is bulk TCP throughput from the server to the
	// client (the direction of the responses), summed over the probe's
	// parallel streams; Retransmits (summed) and MinRTT (the lowest) are
	// the server's sockets'. TCPStreams has each stream's.
	DownBitsPerSecond float64       `json:"down_bits_per_second"`
	Retransmits       uint64        `json:"retransmits"`
	MinRTT            time.Duration `json:"min_rtt_ns"`
	TCPStreams        []PathStream  `json:"tcp_streams,omitempty"`
	// UDPSent datagrams went from the client to the server;
	// UDPLossPercent of them never arrived. UDPJitter is RFC 3550's.
	UDPSent        uint64        `json:"udp_sent"`
	UDPLossPercent float64       `json:"udp_loss_percent"`
	UDPJitter      time.Duration `json:"udp_jitter_ns"`
	// UDPDownSent datagrams went the other way, from the server to the
	// client (the direction of responses); UDPDownLossPercent of them
	// never arrived, UDPDownJitter as the client measured it.
	UDPDownSent        uint64        `json:"udp_down_sent"`
	UDPDownLossPercent float64       `json:"udp_down_loss_percent"`
	UDPDownJitter      time.Duration `json:"udp_down_jitter_ns"`
	// Error says why the probe, or a part of it, failed.
	Error string `json:"error,omitempty"`
}

// Ran reports a probe that measured something.
func (p *PathProbe) Ran() bool {
	return p != nil && (p.DownBitsPerSecond > 0 || p.UDPSent > 0 || p.UDPDownSent > 0)
}

// PathStream is one TCP stream of the path probe, as the server's socket
// saw it at the end.
type PathStream struct {
	BitsPerSecond float64       `json:"bits_per_second"`
	Retransmits   uint64        `json:"retransmits"`
	RTT           time.Duration `json:"rtt_ns"`
	MinRTT        time.Duration `json:"min_rtt_ns"`
}
