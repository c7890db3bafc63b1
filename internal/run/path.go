package run

import (
	"context"
	"errors"
	"time"

	"github.com/netdoctor/netdoctor/internal/evidence"
	"github.com/netdoctor/netdoctor/internal/layer"
)

// The path probe: a second and a half of bulk TCP from the server to the
// client on probeStreams parallel streams, then as long of light UDP
// (1000 datagrams of 200 bytes a second, 1.6 Mbit/s) from the client to
// the server for the loss, and a second of it back from the server (the
// direction of the responses, where a lossy path hurts an HTTP service
// most): about five seconds before the baseline, and a load on the path
// no heavier than the run's own. Several streams, since
// one is bound by its window over the RTT and can carry less than the
// application's many connections do; their sum is the path's.
const (
	probeTCP     = 1500 * time.Millisecond
	probeStreams = 4
	probeUDP     = 1500 * time.Millisecond
	probeUDPDown = time.Second
	probeUDPRate = 1000
	probeUDPSize = 200
)

// pathProbe measures the path through the server agent's test endpoint,
// when it offers one and the run did not turn the probe off. It returns
// nil when nothing was probed; a failed probe says why in Error.
func pathProbe(ctx context.Context, o Options, server *side) *evidence.PathProbe {
	if o.NoPathProbe || server.remote == nil || server.remote.TestEndpoint() == "" {
		return nil
	}
	addr, token := server.remote.TestEndpoint(), server.remote.Token()
	o.phase("path", probeTCP+probeUDP+probeUDPDown)
	p := &evidence.PathProbe{Endpoint: addr}
	var errs []error
	tcp, err := layer.RunTCP(ctx, layer.TCPOptions{Addr: addr, Token: token, Dir: layer.Down, Streams: probeStreams, Duration: probeTCP})
	if err == nil {
		p.DownBitsPerSecond, p.Retransmits, p.MinRTT = tcp.BitsPerSecond, tcp.Retrans, tcp.MinRTT()
		for _, s := range tcp.Streams {
			p.TCPStreams = append(p.TCPStreams, evidence.PathStream{BitsPerSecond: s.BitsPerSecond,
				Retransmits: uint64(s.Retrans), RTT: s.RTT, MinRTT: s.MinRTT})
		}
	} else {
		errs = append(errs, err)
	}
	udp, err := layer.RunUDP(ctx, layer.UDPOptions{Addr: addr, Token: token, Rate: probeUDPRate, Size: probeUDPSize, Duration: probeUDP})
	if err == nil {
		p.UDPSent, p.UDPLossPercent, p.UDPJitter = udp.Sent, udp.LossPercent, udp.Jitter
	} else {
		errs = append(errs, err)
	}
	down, err := layer.RunUDP(ctx, layer.UDPOptions{Addr: addr, Token: token, Dir: layer.Down, Rate: probeUDPRate, Size: probeUDPSize, Duration: probeUDPDown})
	if err == nil {
		p.UDPDownSent, p.UDPDownLossPercent, p.UDPDownJitter = down.Sent, down.LossPercent, down.Jitter
	} else {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		p.Error = err.Error()
	}
	return p
}
